package modeltest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/modeltest"
)

type sseEvent struct {
	name string
	data map[string]any
}

// post sends body as JSON and returns the response and its SSE events (if
// it is a stream) or its JSON body.
func post(t *testing.T, url string, body any, header ...string) (*http.Response, []sseEvent, map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	req, err := http.NewRequest(http.MethodPost, url, bytes.NewReader(b))
	require.NoError(t, err)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		var m map[string]any
		require.NoError(t, json.Unmarshal(raw, &m), "%s", raw)
		return resp, nil, m
	}
	var events []sseEvent
	sc := bufio.NewScanner(bytes.NewReader(raw))
	var name string
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			name = strings.TrimPrefix(line, "event: ")
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m))
			require.Equal(t, name, m["type"], "the event name is the data's type")
			events = append(events, sseEvent{name, m})
		}
	}
	return resp, events, nil
}

func names(events []sseEvent) []string {
	var out []string
	for _, e := range events {
		out = append(out, e.name)
	}
	return out
}

func messages(prompt string, more ...map[string]any) map[string]any {
	msgs := []any{map[string]any{"role": "user", "content": prompt}}
	for _, m := range more {
		msgs = append(msgs, m)
	}
	return map[string]any{"model": "claude-test", "stream": true, "max_tokens": 100, "messages": msgs,
		"tools": []any{map[string]any{"name": "Bash"}, map[string]any{"name": "Write"}, map[string]any{"name": "ToolSearch"}}}
}

func TestAnthropicStreamsTextAndToolUse(t *testing.T) {
	usage := modeltest.Usage{InputTokens: 7, OutputTokens: 3, CacheCreationInputTokens: 11, CacheReadInputTokens: 13}
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{{
		Text:  "I will run it",
		Calls: []modeltest.Call{modeltest.Shell("echo hi"), modeltest.WriteFile("/w/a.txt", "x")},
		Usage: &usage,
	}}})
	resp, events, _ := post(t, srv.URL()+"/v1/messages?beta=true", messages("hello"))
	require.Equal(t, http.StatusOK, resp.StatusCode)
	require.Equal(t, []string{"message_start", "ping"}, names(events[:2]))
	assert.Equal(t, []string{"message_delta", "message_stop"}, names(events[len(events)-2:]))
	assert.Equal(t, map[string]any{"input_tokens": 7.0, "output_tokens": 1.0, "cache_creation_input_tokens": 11.0,
		"cache_read_input_tokens": 13.0}, events[0].data["message"].(map[string]any)["usage"])
	// The content blocks, their deltas joined.
	type block struct {
		start map[string]any
		text  string
	}
	var blocks []*block
	for _, e := range events {
		switch e.name {
		case "content_block_start":
			assert.Equal(t, float64(len(blocks)), e.data["index"])
			blocks = append(blocks, &block{start: e.data["content_block"].(map[string]any)})
		case "content_block_delta":
			d := e.data["delta"].(map[string]any)
			if d["type"] == "text_delta" {
				blocks[len(blocks)-1].text += d["text"].(string)
			} else {
				assert.Equal(t, "input_json_delta", d["type"])
				blocks[len(blocks)-1].text += d["partial_json"].(string)
			}
		}
	}
	require.Len(t, blocks, 3)
	assert.Equal(t, "text", blocks[0].start["type"])
	assert.Equal(t, "I will run it", blocks[0].text)
	assert.Equal(t, "tool_use", blocks[1].start["type"])
	assert.Equal(t, "Bash", blocks[1].start["name"])
	var input map[string]any
	require.NoError(t, json.Unmarshal([]byte(blocks[1].text), &input))
	assert.Equal(t, "echo hi", input["command"])
	assert.Equal(t, "Write", blocks[2].start["name"])
	assert.JSONEq(t, `{"file_path":"/w/a.txt","content":"x"}`, blocks[2].text)
	delta := events[len(events)-2].data
	assert.Equal(t, "tool_use", delta["delta"].(map[string]any)["stop_reason"])
	assert.Equal(t, 3.0, delta["usage"].(map[string]any)["output_tokens"])

	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	r := reqs[0]
	assert.Equal(t, modeltest.Anthropic, r.API)
	assert.Equal(t, "claude-test", r.Model)
	assert.Equal(t, []string{"Bash", "Write", "ToolSearch"}, r.Tools)
	assert.Equal(t, "hello", r.Prompt)
	assert.Equal(t, 0, r.Turn)
	assert.Equal(t, usage, r.Served.Usage)
	require.Len(t, r.Served.Calls, 2)
	assert.Equal(t, blocks[1].start["id"], r.Served.Calls[0].ID)
	assert.JSONEq(t, `{"file_path":"/w/a.txt","content":"x"}`, string(r.Served.Calls[1].Input))
	assert.Equal(t, usage, srv.Usage(""))
	assert.Equal(t, usage, srv.Usage(r.Session))
}

func TestAnthropicPlainJSON(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.Say("plain")}})
	body := messages("hi")
	body["stream"] = false
	resp, _, m := post(t, srv.URL()+"/v1/messages", body)
	require.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Equal(t, "message", m["type"])
	assert.Equal(t, "end_turn", m["stop_reason"])
	assert.Equal(t, []any{map[string]any{"type": "text", "text": "plain"}}, m["content"])
	assert.Equal(t, 20.0, m["usage"].(map[string]any)["output_tokens"])
}

func TestErrorsInEachAPI(t *testing.T) {
	for _, tc := range []struct {
		name      string
		turn      modeltest.Turn
		status    int
		anthropic string // error.type
		openai    string // error.code
		header    string
	}{
		{"401", modeltest.Unauthorized(), 401, "authentication_error", "invalid_api_key", ""},
		{"429", modeltest.RateLimited(1500 * time.Millisecond), 429, "rate_limit_error", "rate_limit_exceeded", "2"},
		{"529", modeltest.Overloaded(), 529, "overloaded_error", "server_error", ""},
		{"500", modeltest.ServerError(), 500, "api_error", "server_error", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{tc.turn, tc.turn}})
			resp, _, m := post(t, srv.URL()+"/v1/messages", messages("x"))
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, "error", m["type"])
			assert.Equal(t, tc.anthropic, m["error"].(map[string]any)["type"])
			assert.NotEmpty(t, resp.Header.Get("request-id"))
			assert.Equal(t, tc.header, resp.Header.Get("retry-after"))
			if tc.status == 429 {
				assert.Equal(t, "0", resp.Header.Get("anthropic-ratelimit-requests-remaining"))
			}
			resp, _, m = post(t, srv.URL()+"/v1/responses", map[string]any{"model": "m", "stream": true, "input": "x",
				"tools": []any{map[string]any{"type": "function", "name": "exec_command"}}})
			assert.Equal(t, tc.status, resp.StatusCode)
			assert.Equal(t, tc.openai, m["error"].(map[string]any)["code"])
			for _, r := range srv.Requests() {
				require.NotNil(t, r.Served.Error)
				assert.Equal(t, tc.status, r.Served.Status)
				assert.Zero(t, r.Served.Usage, "an error serves no tokens")
			}
		})
	}
}

func TestResponsesStream(t *testing.T) {
	usage := modeltest.Usage{InputTokens: 50, OutputTokens: 5, CacheReadInputTokens: 40}
	srv := modeltest.Start(t, modeltest.Script{Match: "build it", Turns: []modeltest.Turn{
		{Text: "running", Calls: []modeltest.Call{modeltest.Shell("make")}, Usage: &usage},
		{When: "exit_code: 0", Text: "built"},
	}})
	body := map[string]any{"model": "gpt-x", "stream": true, "input": []any{
		map[string]any{"type": "message", "role": "user", "content": []any{map[string]any{"type": "input_text", "text": "please build it"}}},
	}, "tools": []any{map[string]any{"type": "function", "name": "exec_command"}}}
	_, events, _ := post(t, srv.URL()+"/v1/responses", body, "Session-Id", "s1")
	assert.Equal(t, []string{"response.created",
		"response.output_item.added", "response.output_text.delta", "response.output_item.done",
		"response.output_item.added", "response.output_item.done", "response.completed"}, names(events))
	call := events[5].data["item"].(map[string]any)
	assert.Equal(t, "function_call", call["type"])
	assert.Equal(t, "exec_command", call["name"])
	assert.JSONEq(t, `{"cmd":"make"}`, call["arguments"].(string))
	done := events[6].data["response"].(map[string]any)
	assert.Equal(t, map[string]any{"input_tokens": 50.0, "input_tokens_details": map[string]any{"cached_tokens": 40.0},
		"output_tokens": 5.0, "output_tokens_details": map[string]any{"reasoning_tokens": 0.0}, "total_tokens": 55.0}, done["usage"])

	// The next request carries the call's output.
	body["input"] = append(body["input"].([]any),
		map[string]any{"type": "function_call", "call_id": call["call_id"], "name": "exec_command", "arguments": "{}"},
		map[string]any{"type": "function_call_output", "call_id": call["call_id"], "output": "ok\nexit_code: 0"})
	_, events, _ = post(t, srv.URL()+"/v1/responses", body, "Session-Id", "s1")
	assert.Equal(t, "built", events[len(events)-2].data["item"].(map[string]any)["content"].([]any)[0].(map[string]any)["text"])
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.Equal(t, "ok\nexit_code: 0", reqs[1].Latest)
	assert.Equal(t, "please build it", reqs[1].Prompt)
	assert.Equal(t, 1, reqs[1].Turn)
	assert.Equal(t, usage.Add(modeltest.Usage{InputTokens: 100, OutputTokens: 20}), srv.Usage("s1"))
}

func TestResponsesCallShapes(t *testing.T) {
	fn := func(name string) map[string]any { return map[string]any{"type": "function", "name": name} }
	codeMode := []any{map[string]any{"type": "namespace", "name": "functions", "tools": []any{
		map[string]any{"type": "custom", "name": "exec"}, fn("wait")}}}
	for _, tc := range []struct {
		name       string
		tools      []any
		call       modeltest.Call
		kind, tool string
		input      string // substring of the arguments or custom input
	}{
		{"shell as exec_command", []any{fn("exec_command")}, modeltest.Shell("ls -l"), "function_call", "exec_command", `"cmd":"ls -l"`},
		{"shell through exec", codeMode, modeltest.Shell("ls -l"), "custom_tool_call", "exec", `tools.exec_command({"cmd":"ls -l"})`},
		{"shell as shell", []any{fn("shell")}, modeltest.Shell("ls"), "function_call", "shell", `["bash","-lc","ls"]`},
		{"write as a command", []any{fn("exec_command")}, modeltest.WriteFile("/w/it's", "a'b"), "function_call", "exec_command",
			`printf '%s' 'a'\"'\"'b' \u003e '/w/it'\"'\"'s'`},
		{"function", []any{fn("update_plan")}, modeltest.Tool("update_plan", map[string]any{"plan": 1}), "function_call", "update_plan", `{"plan":1}`},
		{"nested tool through exec", codeMode, modeltest.Tool("mcp__foreman__report", map[string]any{"ok": true}), "custom_tool_call", "exec",
			`tools.mcp__foreman__report({"ok":true})`},
		{"custom", codeMode, modeltest.Custom("exec", "text(1)"), "custom_tool_call", "exec", "text(1)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.Do(tc.call)}})
			_, events, _ := post(t, srv.URL()+"/v1/responses", map[string]any{"stream": true, "input": "go", "tools": tc.tools})
			item := events[len(events)-2].data["item"].(map[string]any)
			assert.Equal(t, tc.kind, item["type"])
			assert.Equal(t, tc.tool, item["name"])
			got, _ := item["arguments"].(string)
			if tc.kind == "custom_tool_call" {
				got = item["input"].(string)
			}
			assert.Contains(t, got, tc.input)
		})
	}
}

func TestScriptsPerSessionAndWhen(t *testing.T) {
	srv := modeltest.Start(t,
		modeltest.Script{Name: "alpha", Match: "story A", Turns: []modeltest.Turn{
			{When: "gates failed", Text: "fixing"}, // skipped when the input does not say so
			{Text: "A done"},
		}},
		modeltest.Script{Name: "beta", Match: "story B", Turns: []modeltest.Turn{modeltest.Say("B done")}},
	)
	text := func(prompt, session string) string {
		_, events, _ := post(t, srv.URL()+"/v1/messages", messages(prompt), "X-Claude-Code-Session-Id", session)
		var out string
		for _, e := range events {
			if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
				out += d["text"].(string)
			}
		}
		return out
	}
	var wg sync.WaitGroup
	got := make([]string, 2)
	wg.Go(func() { got[0] = text("work on story A", "a") })
	wg.Go(func() { got[1] = text("work on story B", "b") })
	wg.Wait()
	assert.Equal(t, []string{"A done", "B done"}, got)
	assert.Contains(t, text("work on story A", "a"), "no turn left", "script alpha is used up")
	assert.Equal(t, "fixing", text("work on story A: the gates failed", "a2"), "a new session starts the script again")
	assert.Contains(t, text("story C", "c"), "no script matched")
	unmatched := srv.Unmatched()
	require.Len(t, unmatched, 2)
	assert.Equal(t, "alpha", unmatched[0].Script)
	assert.Equal(t, "", unmatched[1].Script)
	assert.Equal(t, -1, unmatched[1].Turn)
}

func TestDeferredToolIsLoadedWithToolSearch(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{
		modeltest.Do(modeltest.Tool("mcp__foreman__report", map[string]any{"status": "done"})),
		modeltest.Say("reported"),
	}})
	toolUse := func(body map[string]any) map[string]any {
		_, events, _ := post(t, srv.URL()+"/v1/messages", body, "X-Claude-Code-Session-Id", "s")
		for _, e := range events {
			if b, ok := e.data["content_block"].(map[string]any); ok && b["type"] == "tool_use" {
				return b
			}
		}
		return nil
	}
	body := messages("report")
	first := toolUse(body)
	require.NotNil(t, first)
	assert.Equal(t, "ToolSearch", first["name"])
	var input map[string]any
	require.NoError(t, json.Unmarshal(srv.Requests()[0].Served.Calls[0].Input, &input))
	assert.Equal(t, "select:mcp__foreman__report", input["query"])
	// Claude Code now offers the tool.
	body["tools"] = append(body["tools"].([]any), map[string]any{"name": "mcp__foreman__report"})
	second := toolUse(body)
	require.NotNil(t, second)
	assert.Equal(t, "mcp__foreman__report", second["name"])
	reqs := srv.Requests()
	assert.Equal(t, []int{0, 0}, []int{reqs[0].Turn, reqs[1].Turn}, "both answer turn 0")
}

func TestLoadToolsTurn(t *testing.T) {
	turn := modeltest.LoadTools("a", "b")
	require.Len(t, turn.Calls, 1)
	assert.Equal(t, "ToolSearch", turn.Calls[0].Name)
	assert.Equal(t, map[string]any{"query": "select:a,b", "max_results": 2}, turn.Calls[0].Input)
}

func TestSideRequestsConsumeNoTurn(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.Say("main")}})
	side := messages("write a title")
	delete(side, "tools")
	_, events, _ := post(t, srv.URL()+"/v1/messages", side, "X-Claude-Code-Session-Id", "s")
	assert.Equal(t, "modeltest", events[3].data["delta"].(map[string]any)["text"])
	_, events, _ = post(t, srv.URL()+"/v1/messages", messages("x"), "X-Claude-Code-Session-Id", "s")
	assert.Equal(t, "main", events[3].data["delta"].(map[string]any)["text"])
	resp, _, m := post(t, srv.URL()+"/v1/messages/count_tokens", messages("x"))
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	assert.Positive(t, m["input_tokens"])
	reqs := srv.Requests()
	assert.Equal(t, []bool{true, false, true}, []bool{reqs[0].Side, reqs[1].Side, reqs[2].Side})
}

func TestUnknownPathIsLoggedAnd404(t *testing.T) {
	var mu sync.Mutex
	var logged []string
	srv, err := modeltest.New(modeltest.Config{Logf: func(f string, a ...any) {
		mu.Lock()
		defer mu.Unlock()
		logged = append(logged, f)
	}})
	require.NoError(t, err)
	defer srv.Close()
	resp, err := http.Get(srv.URL() + "/v1/models")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusNotFound, resp.StatusCode)
	resp, err = http.Head(srv.URL() + "/")
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusOK, resp.StatusCode)
	mu.Lock()
	assert.Len(t, logged, 1)
	mu.Unlock()
	reqs := srv.Requests()
	require.Len(t, reqs, 2)
	assert.True(t, reqs[0].Unmatched)
	assert.Equal(t, "/v1/models", reqs[0].Path)
}

func TestDelayOnTheClockAndCancellation(t *testing.T) {
	clock := foreman.NewFakeClock(time.Unix(1_800_000_000, 0))
	release := make(chan struct{})
	srv, err := modeltest.New(modeltest.Config{Clock: clock, Scripts: []modeltest.Script{{Turns: []modeltest.Turn{
		{Text: "late", Delay: time.Minute},
		{Text: "held", Wait: release},
		{Text: "never", Delay: time.Hour},
	}}}})
	require.NoError(t, err)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	got := make(chan string, 1)
	go func() {
		_, events, _ := post(t, srv.URL()+"/v1/messages", messages("x"), "X-Claude-Code-Session-Id", "s")
		got <- events[3].data["delta"].(map[string]any)["text"].(string)
	}()
	require.NoError(t, clock.BlockUntil(ctx, 1))
	clock.Advance(59 * time.Second)
	select {
	case <-got:
		t.Fatal("answered before its delay")
	default:
	}
	clock.Advance(time.Second)
	assert.Equal(t, "late", <-got)

	go func() {
		_, events, _ := post(t, srv.URL()+"/v1/messages", messages("x"), "X-Claude-Code-Session-Id", "s")
		got <- events[3].data["delta"].(map[string]any)["text"].(string)
	}()
	close(release)
	assert.Equal(t, "held", <-got)

	// A request cancelled during its delay is recorded as such.
	rctx, rcancel := context.WithCancel(ctx)
	b, _ := json.Marshal(messages("x"))
	req, _ := http.NewRequestWithContext(rctx, http.MethodPost, srv.URL()+"/v1/messages", bytes.NewReader(b))
	req.Header.Set("X-Claude-Code-Session-Id", "s")
	done := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	require.NoError(t, clock.BlockUntil(ctx, 1))
	rcancel()
	require.Error(t, <-done)
	require.Eventually(t, func() bool { return srv.Requests()[2].Served.Cancelled }, 10*time.Second, time.Millisecond)
}

func TestCloseReleasesHeldRequests(t *testing.T) {
	srv, err := modeltest.New(modeltest.Config{Scripts: []modeltest.Script{{Turns: []modeltest.Turn{
		{Text: "never", Wait: make(chan struct{})},
	}}}})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() {
		b, _ := json.Marshal(messages("x"))
		resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", bytes.NewReader(b))
		if err == nil {
			_, err = io.ReadAll(resp.Body)
			resp.Body.Close()
		}
		done <- err
	}()
	require.Eventually(t, func() bool { return len(srv.Requests()) == 1 }, 10*time.Second, time.Millisecond)
	srv.Close()
	<-done
	assert.True(t, srv.Requests()[0].Served.Cancelled)
}

func TestBadConfig(t *testing.T) {
	for name, cfg := range map[string]modeltest.Config{
		"no turns":       {Scripts: []modeltest.Script{{Name: "empty"}}},
		"bad status":     {Scripts: []modeltest.Script{{Turns: []modeltest.Turn{{Error: &modeltest.APIError{Status: 200}}}}}},
		"negative delay": {Scripts: []modeltest.Script{{Turns: []modeltest.Turn{{Delay: -time.Second}}}}},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := modeltest.New(cfg)
			require.ErrorIs(t, err, modeltest.ErrConfig)
		})
	}
}

func TestBadRequestBody(t *testing.T) {
	srv := modeltest.Start(t)
	resp, err := http.Post(srv.URL()+"/v1/messages", "application/json", strings.NewReader("{"))
	require.NoError(t, err)
	resp.Body.Close()
	assert.Equal(t, http.StatusBadRequest, resp.StatusCode)
}

func TestTimesAndSum(t *testing.T) {
	turns := modeltest.Times(3, modeltest.Overloaded())
	require.Len(t, turns, 3)
	assert.Equal(t, 529, turns[2].Error.Status)
	u := modeltest.Sum([]modeltest.Request{
		{Served: modeltest.Served{Usage: modeltest.Usage{InputTokens: 1, OutputTokens: 2}}},
		{Served: modeltest.Served{Usage: modeltest.Usage{InputTokens: 3, CacheReadInputTokens: 4, CacheCreationInputTokens: 5}}},
	})
	assert.Equal(t, modeltest.Usage{InputTokens: 4, OutputTokens: 2, CacheReadInputTokens: 4, CacheCreationInputTokens: 5}, u)
}

func TestReplyAnswersFromThePrompt(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Match: "assignment", Turns: []modeltest.Turn{{
		Reply: func(in modeltest.Input) modeltest.Turn {
			id := in.Prompt[strings.Index(in.Prompt, "assignment ")+len("assignment "):]
			return modeltest.Turn{Text: "reporting for " + id, Usage: &modeltest.Usage{InputTokens: 7, OutputTokens: 3}}
		},
	}}})
	_, events, _ := post(t, srv.URL()+"/v1/messages", messages("you have assignment US-7-a2"), "X-Claude-Code-Session-Id", "s")
	var out string
	for _, e := range events {
		if d, ok := e.data["delta"].(map[string]any); ok && d["type"] == "text_delta" {
			out += d["text"].(string)
		}
	}
	assert.Equal(t, "reporting for US-7-a2", out)
	reqs := srv.Requests()
	require.Len(t, reqs, 1)
	assert.Equal(t, "reporting for US-7-a2", reqs[0].Served.Text)
	assert.Equal(t, int64(7), reqs[0].Served.Usage.InputTokens, "the reply's usage")
}
