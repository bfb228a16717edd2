package modeltest_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
)

// geminiPost posts a Gemini API request and returns the status and the
// responses (one, or each event of a stream).
func geminiPost(t *testing.T, srv *modeltest.Server, method string, body any) (int, []map[string]any) {
	t.Helper()
	b, err := json.Marshal(body)
	require.NoError(t, err)
	url := srv.URL() + "/v1beta/models/gemini-test:" + method
	if method == "streamGenerateContent" {
		url += "?alt=sse"
	}
	resp, err := http.Post(url, "application/json", bytes.NewReader(b))
	require.NoError(t, err)
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	if !strings.HasPrefix(resp.Header.Get("content-type"), "text/event-stream") {
		var m map[string]any
		require.NoError(t, json.Unmarshal(data, &m), "%s", data)
		return resp.StatusCode, []map[string]any{m}
	}
	var out []map[string]any
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if line, ok := strings.CutPrefix(strings.TrimSpace(sc.Text()), "data: "); ok {
			var m map[string]any
			require.NoError(t, json.Unmarshal([]byte(line), &m))
			out = append(out, m)
		}
	}
	return resp.StatusCode, out
}

func geminiRequest(user ...any) map[string]any {
	return map[string]any{
		"contents": user,
		"tools": []any{map[string]any{"functionDeclarations": []any{
			map[string]any{"name": "run_shell_command"}, map[string]any{"name": "write_file"}, map[string]any{"name": "mcp_foreman_report"}}}},
	}
}

func userText(s string) map[string]any {
	return map[string]any{"role": "user", "parts": []any{map[string]any{"text": s}}}
}

func TestGeminiAPI(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Match: "build", Turns: []modeltest.Turn{
		{Text: "Working.", Calls: []modeltest.Call{modeltest.Shell("make"), modeltest.WriteFile("/w/a.txt", "a"),
			modeltest.Tool("mcp__foreman__report", map[string]any{"outcome": "done"})},
			Usage: &modeltest.Usage{InputTokens: 500, OutputTokens: 7, CacheReadInputTokens: 400}},
		{When: "made it", Text: "Done."},
		modeltest.Unauthorized(),
		modeltest.RateLimited(90 * time.Second),
	}})

	status, events := geminiPost(t, srv, "streamGenerateContent", geminiRequest(userText("please build")))
	require.Equal(t, http.StatusOK, status)
	require.Len(t, events, 2, "the text, then the calls with the usage")
	last := events[1]
	cand := last["candidates"].([]any)[0].(map[string]any)
	assert.Equal(t, "STOP", cand["finishReason"])
	var names []any
	for _, p := range cand["content"].(map[string]any)["parts"].([]any) {
		names = append(names, p.(map[string]any)["functionCall"].(map[string]any)["name"])
	}
	assert.Equal(t, []any{"run_shell_command", "write_file", "mcp_foreman_report"}, names)
	assert.Equal(t, map[string]any{"promptTokenCount": 500.0, "candidatesTokenCount": 7.0, "totalTokenCount": 507.0,
		"cachedContentTokenCount": 400.0}, last["usageMetadata"])
	assert.NotContains(t, events[0], "usageMetadata")

	// The tool results: a user content of functionResponse parts.
	history := []any{userText("please build"),
		map[string]any{"role": "model", "parts": []any{map[string]any{"functionCall": map[string]any{"name": "run_shell_command"}}}},
		map[string]any{"role": "user", "parts": []any{map[string]any{"functionResponse": map[string]any{
			"name": "run_shell_command", "response": map[string]any{"output": "made it"}}}}}}
	status, events = geminiPost(t, srv, "generateContent", geminiRequest(history...))
	require.Equal(t, http.StatusOK, status)
	require.Len(t, events, 1)
	parts := events[0]["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)
	assert.Equal(t, "Done.", parts[0].(map[string]any)["text"])

	status, events = geminiPost(t, srv, "generateContent", geminiRequest(history...))
	assert.Equal(t, http.StatusUnauthorized, status)
	assert.Equal(t, "UNAUTHENTICATED", events[0]["error"].(map[string]any)["status"])
	status, events = geminiPost(t, srv, "streamGenerateContent", geminiRequest(history...))
	assert.Equal(t, http.StatusTooManyRequests, status)
	e := events[0]["error"].(map[string]any)
	assert.Equal(t, "RESOURCE_EXHAUSTED", e["status"])
	assert.Equal(t, []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "90s"}}, e["details"])

	// A side request wanting JSON gets a value of its schema.
	status, events = geminiPost(t, srv, "generateContent", map[string]any{
		"contents": []any{userText("who speaks next?")},
		"generationConfig": map[string]any{"responseMimeType": "application/json", "responseJsonSchema": map[string]any{
			"type": "object", "properties": map[string]any{
				"reasoning":    map[string]any{"type": "string"},
				"next_speaker": map[string]any{"type": "string", "enum": []any{"user", "model"}},
				"score":        map[string]any{"type": "INTEGER"}}}}})
	require.Equal(t, http.StatusOK, status)
	text := events[0]["candidates"].([]any)[0].(map[string]any)["content"].(map[string]any)["parts"].([]any)[0].(map[string]any)["text"]
	assert.JSONEq(t, `{"next_speaker":"user","reasoning":"modeltest","score":1}`, text.(string))

	status, events = geminiPost(t, srv, "countTokens", map[string]any{"contents": []any{userText("count me")}})
	require.Equal(t, http.StatusOK, status)
	assert.Positive(t, events[0]["totalTokens"])

	reqs := srv.Requests()
	require.Len(t, reqs, 6)
	assert.Equal(t, modeltest.Gemini, reqs[0].API)
	assert.Equal(t, "gemini-test", reqs[0].Model)
	assert.True(t, reqs[0].Stream)
	assert.False(t, reqs[1].Stream)
	assert.Equal(t, "made it", reqs[1].Latest)
	assert.Equal(t, reqs[0].Session, reqs[1].Session, "a session is its first user message")
	// Resuming, Gemini CLI rebuilds the session context before the prompt.
	geminiPost(t, srv, "generateContent", geminiRequest(
		userText("<session_context>\nnew listing: made.txt\n</session_context>please build"),
		map[string]any{"role": "model", "parts": []any{map[string]any{"text": "x"}}}, userText("again")))
	geminiPost(t, srv, "generateContent", geminiRequest(userText("<session_context>\nold</session_context>please build")))
	more := srv.Requests()
	assert.Equal(t, more[6].Session, more[7].Session)
	assert.True(t, reqs[4].Side)
	assert.Len(t, srv.Unmatched(), 2, "the session's turns were all served")
}
