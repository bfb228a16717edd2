package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"sort"
	"strconv"
	"strings"
)

// Gemini CLI's names for the portable calls (its built-in tools, as the
// requests of @google/gemini-cli 0.61 offer them).
const (
	geminiShellTool = "run_shell_command"
	geminiWriteTool = "write_file"
)

// geminiMethod is the Gemini API method a path calls (generateContent,
// streamGenerateContent, countTokens: /v1beta/models/<model>:<method>), and
// the model; "" when the path is not one.
func geminiMethod(path string) (method, model string) {
	i := strings.LastIndex(path, "/models/")
	if i < 0 {
		return "", ""
	}
	model, method, ok := strings.Cut(path[i+len("/models/"):], ":")
	if !ok {
		return "", ""
	}
	switch method {
	case "generateContent", "streamGenerateContent", "countTokens":
		return method, model
	}
	return "", ""
}

// sessionContext is the block Gemini CLI puts before the prompt.
var sessionContext = regexp.MustCompile(`(?s)<session_context>.*?</session_context>`)

// geminiPath is the Gemini API method a path calls; "" for none.
func geminiPath(path string) string {
	m, _ := geminiMethod(path)
	return m
}

// geminiPart is a part of a Gemini API content: text, a function call (the
// model's), a function response (the client's tool result).
type geminiPart struct {
	Text         string `json:"text"`
	Thought      bool   `json:"thought"`
	FunctionCall *struct {
		Name string `json:"name"`
	} `json:"functionCall"`
	FunctionResponse *struct {
		Name     string          `json:"name"`
		Response json.RawMessage `json:"response"`
	} `json:"functionResponse"`
}

// parseGemini reads a generateContent or streamGenerateContent request.
func parseGemini(model string, stream bool, body []byte) (parsed, error) {
	var req struct {
		Contents []struct {
			Role  string       `json:"role"`
			Parts []geminiPart `json:"parts"`
		} `json:"contents"`
		Tools []struct {
			FunctionDeclarations []struct {
				Name string `json:"name"`
			} `json:"functionDeclarations"`
		} `json:"tools"`
		GenerationConfig struct {
			ResponseMimeType   string          `json:"responseMimeType"`
			ResponseJSONSchema json.RawMessage `json:"responseJsonSchema"`
			ResponseSchema     json.RawMessage `json:"responseSchema"`
		} `json:"generationConfig"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("modeltest: bad Gemini API request: %w", err)
	}
	p := parsed{api: Gemini, model: model, stream: stream, offered: map[string]bool{}}
	for _, t := range req.Tools {
		for _, d := range t.FunctionDeclarations {
			if d.Name != "" {
				p.tools = append(p.tools, d.Name)
				p.offered[d.Name] = true
			}
		}
	}
	lastModel := -1
	for i, c := range req.Contents {
		if c.Role == "model" {
			lastModel = i
		}
	}
	var prompt, latest []string
	answered := false
	for i, c := range req.Contents {
		if c.Role == "model" {
			answered = true
			continue
		}
		text := geminiText(c.Parts)
		if text == "" {
			continue
		}
		if !answered {
			prompt = append(prompt, text)
		}
		if i > lastModel {
			latest = append(latest, text)
		}
	}
	p.prompt = strings.Join(prompt, "\n")
	p.latest = strings.Join(latest, "\n")
	p.side = len(p.tools) == 0
	// Gemini CLI sends no session header, and rebuilds the
	// <session_context> part of the first message (date, directory listing)
	// when it resumes a session: the session is the prompt without it.
	p.keyText = sessionContext.ReplaceAllString(p.prompt, "")
	if strings.EqualFold(req.GenerationConfig.ResponseMimeType, "application/json") {
		p.schema = req.GenerationConfig.ResponseJSONSchema
		if len(p.schema) == 0 {
			p.schema = req.GenerationConfig.ResponseSchema
		}
		if len(p.schema) == 0 {
			p.schema = json.RawMessage(`{}`)
		}
	}
	return p, nil
}

// geminiText is the text of a user content's parts: its texts and its
// function responses (a response's "output", else its JSON).
func geminiText(parts []geminiPart) string {
	var out []string
	for _, pt := range parts {
		if pt.Text != "" && !pt.Thought {
			out = append(out, pt.Text)
		}
		if fr := pt.FunctionResponse; fr != nil {
			var r struct {
				Output string `json:"output"`
				Error  string `json:"error"`
			}
			switch {
			case json.Unmarshal(fr.Response, &r) == nil && r.Output != "":
				out = append(out, r.Output)
			case r.Error != "":
				out = append(out, r.Error)
			default:
				out = append(out, string(fr.Response))
			}
		}
	}
	return strings.Join(out, "\n")
}

// geminiCall is the functionCall a call becomes on the Gemini API: Shell is
// run_shell_command, WriteFile write_file; a Tool named the way Claude Code
// names MCP tools (mcp__server__tool) that the request does not offer is
// called by Gemini CLI's name for it, mcp_server_tool.
func geminiCall(p parsed, c Call) (name string, input any) {
	switch {
	case c.shell != "":
		return geminiShellTool, map[string]any{"command": c.shell, "description": "modeltest: run a command"}
	case c.file != "":
		return geminiWriteTool, map[string]any{"file_path": c.file, "content": c.body}
	case c.custom:
		return c.Name, map[string]any{"input": c.Input}
	}
	name = c.Name
	if rest, ok := strings.CutPrefix(name, "mcp__"); ok && !p.offered[name] {
		if server, tool, ok := strings.Cut(rest, "__"); ok {
			name = "mcp_" + server + "_" + tool
		}
	}
	if c.Input == nil {
		return name, map[string]any{}
	}
	return name, c.Input
}

// geminiUsage is the usageMetadata of a response. promptTokenCount counts
// the cached tokens in, as the Gemini API does.
func geminiUsage(u Usage) map[string]any {
	m := map[string]any{
		"promptTokenCount":     u.InputTokens,
		"candidatesTokenCount": u.OutputTokens,
		"totalTokenCount":      u.InputTokens + u.OutputTokens,
	}
	if u.CacheReadInputTokens > 0 {
		m["cachedContentTokenCount"] = u.CacheReadInputTokens
	}
	return m
}

// serveGemini writes the answer a in the Gemini API's shape: one
// GenerateContentResponse, or a server-sent event stream of them (text in
// chunks, then the function calls, the finish reason and the usage).
func (s *Server) serveGemini(w http.ResponseWriter, p parsed, a *answer) {
	if a.err != nil {
		writeGeminiError(w, a.err)
		return
	}
	respID := s.nextID("resp")
	model := p.model
	if model == "" {
		model = "modeltest"
	}
	response := func(parts []map[string]any, last bool) map[string]any {
		cand := map[string]any{"content": map[string]any{"role": "model", "parts": parts}, "index": 0}
		r := map[string]any{"candidates": []any{cand}, "modelVersion": model, "responseId": respID}
		if last {
			cand["finishReason"] = "STOP"
			r["usageMetadata"] = geminiUsage(a.usage)
		}
		return r
	}
	var calls []map[string]any
	for _, c := range a.calls {
		calls = append(calls, map[string]any{"functionCall": map[string]any{"id": c.ID, "name": c.Name, "args": c.Input}})
	}
	if !p.stream {
		var parts []map[string]any
		if a.text != "" || len(calls) == 0 {
			parts = append(parts, map[string]any{"text": a.text})
		}
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(response(append(parts, calls...), true))
		return
	}
	sse := newSSE(w)
	sse.start()
	text := chunks(a.text)
	if len(text) == 0 && len(calls) == 0 {
		text = []string{""}
	}
	for i, chunk := range text {
		last := i == len(text)-1 && len(calls) == 0
		sse.data(response([]map[string]any{{"text": chunk}}, last))
	}
	if len(calls) > 0 {
		sse.data(response(calls, true))
	}
}

// geminiStatus is the Google RPC status name of an HTTP status.
func geminiStatus(code int) string {
	switch code {
	case http.StatusBadRequest:
		return "INVALID_ARGUMENT"
	case http.StatusUnauthorized:
		return "UNAUTHENTICATED"
	case http.StatusForbidden:
		return "PERMISSION_DENIED"
	case http.StatusNotFound:
		return "NOT_FOUND"
	case http.StatusTooManyRequests:
		return "RESOURCE_EXHAUSTED"
	case http.StatusServiceUnavailable, 529:
		return "UNAVAILABLE"
	case http.StatusGatewayTimeout:
		return "DEADLINE_EXCEEDED"
	}
	if code >= 500 {
		return "INTERNAL"
	}
	return "FAILED_PRECONDITION"
}

// writeGeminiError writes e in the Gemini API's error shape:
// {"error":{"code":Status,"message":Message,"status":Type or the RPC
// status,"details":[...]}}. A 429 whose retry-after header is above zero
// carries a google.rpc.RetryInfo detail with that delay, which Gemini CLI
// waits (at least its own 5 s).
func writeGeminiError(w http.ResponseWriter, e *APIError) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	status := e.Type
	if status == "" {
		status = geminiStatus(e.Status)
	}
	details := []any{}
	if e.Status == http.StatusTooManyRequests {
		if secs, err := strconv.Atoi(e.Header.Get("retry-after")); err == nil && secs > 0 {
			details = append(details, map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
				"retryDelay": strconv.Itoa(secs) + "s"})
		}
	}
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"code": e.Status, "message": e.message(Gemini), "status": status, "details": details}})
}

// schemaExample is a JSON value satisfying a JSON schema as Gemini CLI's
// side requests give them (an object of typed properties): the first enum
// value, "modeltest" for a string, 1 for a number, false, [] and nested
// objects. Gemini CLI's router and next-speaker check ask for such answers;
// the first value of next_speaker's enum, "user", ends the turn.
func schemaExample(raw json.RawMessage) string {
	var v any
	_ = json.Unmarshal(raw, &v)
	b, err := json.Marshal(exampleOf(v))
	if err != nil {
		return "{}"
	}
	return string(b)
}

func exampleOf(schema any) any {
	m, _ := schema.(map[string]any)
	if enum, ok := m["enum"].([]any); ok && len(enum) > 0 {
		return enum[0]
	}
	typ, _ := m["type"].(string)
	switch strings.ToLower(typ) {
	case "string":
		return "modeltest"
	case "integer", "number":
		return 1
	case "boolean":
		return false
	case "array":
		return []any{}
	case "null":
		return nil
	}
	props, _ := m["properties"].(map[string]any)
	keys := make([]string, 0, len(props))
	for k := range props {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	out := map[string]any{}
	for _, k := range keys {
		out[k] = exampleOf(props[k])
	}
	return out
}
