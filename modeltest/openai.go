package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
)

// responsesTool is a tool of a Responses API request: a function, a custom
// (freeform) tool, or a namespace of tools.
type responsesTool struct {
	Type  string          `json:"type"`
	Name  string          `json:"name"`
	Tools []responsesTool `json:"tools"`
}

// responsesItem is an item of a Responses API request's input.
type responsesItem struct {
	Type    string          `json:"type"`
	Role    string          `json:"role"`
	Content json.RawMessage `json:"content"`
	Output  json.RawMessage `json:"output"`
	Tools   []responsesTool `json:"tools"`
}

// parseResponses reads a Responses API request body.
func parseResponses(body []byte) (parsed, error) {
	var req struct {
		Model  string          `json:"model"`
		Stream bool            `json:"stream"`
		Tools  []responsesTool `json:"tools"`
		Input  json.RawMessage `json:"input"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("modeltest: bad Responses API request: %w", err)
	}
	p := parsed{api: OpenAI, model: req.Model, stream: req.Stream, offered: map[string]bool{}, kinds: map[string]string{}}
	var items []responsesItem
	var text string
	if json.Unmarshal(req.Input, &text) == nil {
		items = []responsesItem{{Type: "message", Role: "user", Content: req.Input}}
	} else if err := json.Unmarshal(req.Input, &items); err != nil && len(req.Input) > 0 {
		return parsed{}, fmt.Errorf("modeltest: bad Responses API input: %w", err)
	}
	p.addTools(req.Tools)
	lastModel := -1
	for i, it := range items {
		if it.Type == "additional_tools" {
			p.addTools(it.Tools)
		}
		if modelItem(it) {
			lastModel = i
		}
	}
	var prompt, latest []string
	answered := false
	for i, it := range items {
		if modelItem(it) {
			answered = true
			continue
		}
		t := itemText(it)
		if t == "" {
			continue
		}
		if !answered && it.Type == "message" && it.Role == "user" {
			prompt = append(prompt, t)
		}
		if i > lastModel && (it.Role == "user" || strings.HasSuffix(it.Type, "_output")) {
			latest = append(latest, t)
		}
	}
	p.prompt = strings.Join(prompt, "\n")
	p.latest = strings.Join(latest, "\n")
	p.side = len(p.tools) == 0
	return p, nil
}

func (p *parsed) addTools(tools []responsesTool) {
	for _, t := range tools {
		switch {
		case t.Type == "namespace":
			p.addTools(t.Tools)
		case t.Name != "":
			p.tools = append(p.tools, t.Name)
			p.offered[t.Name] = true
			p.kinds[t.Name] = t.Type
		}
	}
}

// modelItem reports whether an input item is something the model produced.
func modelItem(it responsesItem) bool {
	switch it.Type {
	case "message":
		return it.Role == "assistant"
	case "function_call", "custom_tool_call", "local_shell_call", "reasoning", "web_search_call":
		return true
	}
	return false
}

// itemText is the text of a message's content or of a tool call's output.
func itemText(it responsesItem) string {
	if it.Type == "message" {
		return anyText(it.Content)
	}
	return anyText(it.Output)
}

// anyText is the text of a string, or of an array of content items.
func anyText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		var out []string
		for _, p := range parts {
			if p.Text != "" {
				out = append(out, p.Text)
			}
		}
		return strings.Join(out, "\n")
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
		Output  json.RawMessage `json:"output"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		return anyText(obj.Content) + anyText(obj.Output)
	}
	return ""
}

// responsesCall is the item a call becomes on the Responses API, given the
// tools the request offers: a function_call or a custom_tool_call.
func responsesCall(p parsed, c Call) (kind, name, input string) {
	if c.shell != "" || c.file != "" {
		cmd := c.shell
		if c.file != "" {
			cmd = "printf '%s' " + shellQuote(c.body) + " > " + shellQuote(c.file)
		}
		switch {
		case p.kinds["exec_command"] == "function":
			return "function_call", "exec_command", mustJSON(map[string]any{"cmd": cmd})
		case p.kinds["exec"] == "custom":
			return "custom_tool_call", "exec", "const r = await tools.exec_command(" + mustJSON(map[string]any{"cmd": cmd}) + ");\n" +
				`text(typeof r === "string" ? r : (r.output ?? "") + "\nexit_code: " + r.exit_code);`
		case p.kinds["shell"] == "function":
			return "function_call", "shell", mustJSON(map[string]any{"command": []string{"bash", "-lc", cmd}})
		}
		return "function_call", "exec_command", mustJSON(map[string]any{"cmd": cmd})
	}
	if c.custom {
		s, _ := c.Input.(string)
		return "custom_tool_call", c.Name, s
	}
	args := mustJSON(c.Input)
	if c.Input == nil {
		args = "{}"
	}
	switch {
	case p.kinds[c.Name] == "function":
		return "function_call", c.Name, args
	case p.kinds[c.Name] == "custom":
		return "custom_tool_call", c.Name, args
	case p.kinds["exec"] == "custom":
		return "custom_tool_call", "exec", "const r = await tools." + jsIdent(c.Name) + "(" + args + ");\n" +
			`text(typeof r === "string" ? r : JSON.stringify(r));`
	}
	return "function_call", c.Name, args
}

var nonIdent = regexp.MustCompile(`[^A-Za-z0-9_$]`)

// jsIdent is a tool's name as a JavaScript identifier, the way Codex's exec
// tool exposes nested tools.
func jsIdent(name string) string { return nonIdent.ReplaceAllString(name, "_") }

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'"'"'`) + "'" }

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		return `{}`
	}
	return string(b)
}

func responsesUsage(u Usage) map[string]any {
	return map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CacheReadInputTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": 0},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
}

// serveResponses writes the answer a in the Responses API's shape.
func (s *Server) serveResponses(w http.ResponseWriter, p parsed, a *answer) {
	if a.err != nil {
		writeOpenAIError(w, a.err)
		return
	}
	respID := s.nextID("resp")
	model := p.model
	if model == "" {
		model = "modeltest"
	}
	var output []map[string]any
	if a.text != "" || len(a.calls) == 0 {
		output = append(output, map[string]any{"id": s.nextID("msg"), "type": "message", "status": "completed", "role": "assistant",
			"content": []any{map[string]any{"type": "output_text", "text": a.text, "annotations": []any{}}}})
	}
	for _, c := range a.calls {
		if c.kind == "custom_tool_call" {
			output = append(output, map[string]any{"id": s.nextID("ctc"), "type": "custom_tool_call", "status": "completed",
				"call_id": c.ID, "name": c.Name, "input": c.text})
			continue
		}
		output = append(output, map[string]any{"id": s.nextID("fc"), "type": "function_call", "status": "completed",
			"call_id": c.ID, "name": c.Name, "arguments": c.text})
	}
	response := map[string]any{"id": respID, "object": "response", "status": "completed", "model": model,
		"output": output, "usage": responsesUsage(a.usage)}
	if !p.stream {
		w.Header().Set("content-type", "application/json")
		_ = json.NewEncoder(w).Encode(response)
		return
	}
	sse := newSSE(w)
	sse.start()
	seq := 0
	ev := func(typ string, data map[string]any) {
		data["type"] = typ
		data["sequence_number"] = seq
		seq++
		sse.event(typ, data)
	}
	ev("response.created", map[string]any{"response": map[string]any{"id": respID, "object": "response",
		"status": "in_progress", "model": model, "output": []any{}}})
	for i, item := range output {
		added := map[string]any{}
		for k, v := range item {
			added[k] = v
		}
		added["status"] = "in_progress"
		if item["type"] == "message" {
			added["content"] = []any{}
		}
		ev("response.output_item.added", map[string]any{"output_index": i, "item": added})
		if item["type"] == "message" {
			for _, chunk := range chunks(a.text) {
				ev("response.output_text.delta", map[string]any{"item_id": item["id"], "output_index": i,
					"content_index": 0, "delta": chunk})
			}
		}
		ev("response.output_item.done", map[string]any{"output_index": i, "item": item})
	}
	ev("response.completed", map[string]any{"response": response})
}

func writeOpenAIError(w http.ResponseWriter, e *APIError) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	typ, code := e.openAICode()
	w.Header().Set("content-type", "application/json")
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"error": map[string]any{"message": e.message(OpenAI), "type": typ, "param": nil, "code": code},
	})
}
