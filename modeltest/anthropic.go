package modeltest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// anthropicRequest is the part of a Messages API request the server reads.
type anthropicRequest struct {
	Model    string            `json:"model"`
	Stream   bool              `json:"stream"`
	System   json.RawMessage   `json:"system"`
	Tools    []json.RawMessage `json:"tools"`
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
}

// parseAnthropic reads a Messages API request body.
func parseAnthropic(body []byte) (parsed, error) {
	var req anthropicRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return parsed{}, fmt.Errorf("modeltest: bad Messages API request: %w", err)
	}
	p := parsed{api: Anthropic, model: req.Model, stream: req.Stream, offered: map[string]bool{}}
	for _, raw := range req.Tools {
		var t struct {
			Name string `json:"name"`
		}
		if json.Unmarshal(raw, &t) == nil && t.Name != "" {
			p.tools = append(p.tools, t.Name)
			p.offered[t.Name] = true
		}
	}
	lastAssistant := -1
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			lastAssistant = i
		}
	}
	var prompt, latest []string
	answered := false
	for i, m := range req.Messages {
		if m.Role == "assistant" {
			answered = true
			continue
		}
		text := blockText(m.Content)
		if !answered && m.Role == "user" {
			prompt = append(prompt, text)
		}
		if i > lastAssistant {
			latest = append(latest, text)
		}
	}
	p.prompt = strings.Join(prompt, "\n")
	p.latest = strings.Join(latest, "\n")
	p.side = len(p.tools) == 0
	return p, nil
}

// blockText is the text of a message's content: a string, or blocks whose
// text, tool_result content and nested blocks are joined.
func blockText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type    string          `json:"type"`
		Text    string          `json:"text"`
		Content json.RawMessage `json:"content"`
	}
	if json.Unmarshal(raw, &blocks) != nil {
		return ""
	}
	var out []string
	for _, b := range blocks {
		if b.Text != "" {
			out = append(out, b.Text)
		}
		if len(b.Content) > 0 {
			out = append(out, blockText(b.Content))
		}
	}
	return strings.Join(out, "\n")
}

// anthropicUsage is the usage object of the Messages API.
func anthropicUsage(u Usage, output int64) map[string]any {
	return map[string]any{
		"input_tokens":                u.InputTokens,
		"cache_creation_input_tokens": u.CacheCreationInputTokens,
		"cache_read_input_tokens":     u.CacheReadInputTokens,
		"output_tokens":               output,
	}
}

// serveAnthropic writes the answer a in the Messages API's shape.
func (s *Server) serveAnthropic(w http.ResponseWriter, p parsed, a *answer) {
	if a.err != nil {
		writeAnthropicError(w, a.err, s.nextID("req"))
		return
	}
	msgID := s.nextID("msg")
	model := p.model
	if model == "" {
		model = "modeltest"
	}
	stop := "end_turn"
	if len(a.calls) > 0 {
		stop = "tool_use"
	}
	if !p.stream {
		var content []map[string]any
		if a.text != "" || len(a.calls) == 0 {
			content = append(content, map[string]any{"type": "text", "text": a.text})
		}
		for _, c := range a.calls {
			content = append(content, map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": c.Input})
		}
		w.Header().Set("content-type", "application/json")
		w.Header().Set("request-id", s.nextID("req"))
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": msgID, "type": "message", "role": "assistant", "model": model,
			"content": content, "stop_reason": stop, "stop_sequence": nil,
			"usage": anthropicUsage(a.usage, a.usage.OutputTokens),
		})
		return
	}
	sse := newSSE(w)
	w.Header().Set("request-id", s.nextID("req"))
	sse.start()
	sse.event("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": msgID, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": anthropicUsage(a.usage, min(1, a.usage.OutputTokens)),
	}})
	sse.event("ping", map[string]any{"type": "ping"})
	index := 0
	if a.text != "" || len(a.calls) == 0 {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "text", "text": ""}})
		for _, chunk := range chunks(a.text) {
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "text_delta", "text": chunk}})
		}
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	for _, c := range a.calls {
		sse.event("content_block_start", map[string]any{"type": "content_block_start", "index": index,
			"content_block": map[string]any{"type": "tool_use", "id": c.ID, "name": c.Name, "input": map[string]any{}}})
		for _, chunk := range chunks(string(c.Input)) {
			sse.event("content_block_delta", map[string]any{"type": "content_block_delta", "index": index,
				"delta": map[string]any{"type": "input_json_delta", "partial_json": chunk}})
		}
		sse.event("content_block_stop", map[string]any{"type": "content_block_stop", "index": index})
		index++
	}
	sse.event("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil},
		"usage": anthropicUsage(a.usage, a.usage.OutputTokens)})
	sse.event("message_stop", map[string]any{"type": "message_stop"})
}

func writeAnthropicError(w http.ResponseWriter, e *APIError, requestID string) {
	for k, vs := range e.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("content-type", "application/json")
	w.Header().Set("request-id", requestID)
	w.WriteHeader(e.Status)
	_ = json.NewEncoder(w).Encode(map[string]any{
		"type":       "error",
		"error":      map[string]any{"type": e.anthropicType(), "message": e.message(Anthropic)},
		"request_id": requestID,
	})
}

// anthropicCall is the tool_use a call becomes on the Messages API.
func anthropicCall(c Call) (name string, input any) {
	if c.custom {
		return c.Name, map[string]any{"input": c.Input}
	}
	if c.Input == nil {
		return c.Name, map[string]any{}
	}
	return c.Name, c.Input
}

// countTokens answers /v1/messages/count_tokens with an estimate: a token
// per four bytes of the request.
func countTokens(w http.ResponseWriter, body []byte) {
	w.Header().Set("content-type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{"input_tokens": max(1, len(body)/4)})
}
