package agentcmd

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// TestGeminiParserOnRecordings runs the Gemini CLI parser over what the real
// Gemini CLI 0.61.0 printed (testdata/recorded/gemini_*.jsonl, recorded by
// modeltest's TestRecord: see recorded/README.md). Session ids differ on
// every recording; the test takes them from the init line.
func TestGeminiParserOnRecordings(t *testing.T) {
	tokens := func(in, out int64) phases.TokenUsage { return phases.TokenUsage{Input: in, Output: out} }
	tests := []struct {
		fixture string
		want    Summary
		kinds   []phases.StreamKind
		texts   map[int]string
	}{
		{
			fixture: "gemini_success.jsonl",
			want:    Summary{Result: "Hello from the scripted model.", Model: "gemini-3.8-flash", Tokens: tokens(200, 40), NumTurns: 1},
			kinds:   []phases.StreamKind{sys, sys, txt, res},
			texts:   map[int]string{3: "result success: 200 input (0 cached), 40 output tokens, 0 tool calls"},
		},
		{
			fixture: "gemini_tool_use.jsonl",
			want:    Summary{Result: "Both files are written.", Model: "gemini-3.8-flash", Tokens: tokens(400, 80), NumTurns: 3},
			kinds:   []phases.StreamKind{sys, sys, txt, tool, tool, tool, tool, txt, res},
			texts: map[int]string{
				3: "run_shell_command: echo made > made.txt",
				4: "run_shell_command done",
				5: "write_file: /workspace/written.txt",
			},
		},
		{
			fixture: "gemini_refused.jsonl",
			want: Summary{Result: "I could not write the file.", Model: "gemini-3.8-flash", Tokens: tokens(300, 60), NumTurns: 2,
				PermissionDenials: []phases.AgentPermissionDenial{{Tool: "write_file", Input: "/workspace/refused.txt"}}},
			kinds: []phases.StreamKind{sys, sys, tool, tool, txt, res},
			texts: map[int]string{3: `write_file refused: Tool "write_file" not found. Did you mean one of: "read_file", "update_topic", "grep_search"?`},
		},
		{
			// The retry shows on stderr only: stdout is a plain success.
			fixture: "gemini_retry_429.jsonl",
			want:    Summary{Result: "Answered after the error.", Model: "gemini-3.8-flash", Tokens: tokens(200, 40), NumTurns: 1},
			kinds:   []phases.StreamKind{sys, sys, txt, res},
		},
		{
			fixture: "gemini_401.jsonl",
			want: Summary{Model: "gemini-3.8-flash", Tokens: tokens(100, 20),
				AgentError: `[API Error: {"error":{"code":401,"details":[],"message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}]`,
				APIError: &phases.AgentAPIError{Code: "authentication_failed", Status: 401,
					Message: `[API Error: {"error":{"code":401,"details":[],"message":"API key not valid. Please pass a valid API key.","status":"UNAUTHENTICATED"}}]`}},
			kinds: []phases.StreamKind{sys, sys, res},
		},
		{
			fixture: "gemini_429_terminal.jsonl",
			want: Summary{Model: "gemini-3.8-flash", Tokens: tokens(100, 20),
				AgentError: "[API Error: modeltest: rate limited (scripted 429)\nSuggested retry after 3600s.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method",
				RateLimit:  &phases.AgentRateLimit{Message: "[API Error: modeltest: rate limited (scripted 429)\nSuggested retry after 3600s.]\nPlease wait and try again later. To increase your limits, request a quota increase through AI Studio, or switch to another /auth method"}},
			kinds: []phases.StreamKind{sys, sys, res},
		},
		{
			fixture: "gemini_resume_run1.jsonl",
			want:    Summary{Result: "First answer.", Model: "gemini-3.8-flash", Tokens: tokens(200, 40), NumTurns: 1},
			kinds:   []phases.StreamKind{sys, sys, txt, res},
		},
		{
			// A resumed run's stats are its own.
			fixture: "gemini_resume_run2.jsonl",
			want:    Summary{Result: "Second answer, same session.", Model: "gemini-3.8-flash", Tokens: tokens(200, 40), NumTurns: 1},
			kinds:   []phases.StreamKind{sys, sys, txt, res},
		},
	}
	for _, tc := range tests {
		t.Run(tc.fixture, func(t *testing.T) {
			lines := fixtureLines(t, "recorded/"+tc.fixture)
			var init struct {
				SessionID string `json:"session_id"`
			}
			require.NoError(t, json.Unmarshal([]byte(lines[0]), &init))
			require.NotEmpty(t, init.SessionID)
			p := NewGeminiParser()
			got := parseAll(p, lines)
			assert.Equal(t, tc.kinds, kinds(got))
			for i, text := range tc.texts {
				assert.Equal(t, text, got[i].text, "line %d", i)
			}
			want := tc.want
			want.SessionID = init.SessionID
			if want.PermissionDenials == nil {
				want.PermissionDenials = []phases.AgentPermissionDenial{}
			}
			sum := p.Summary()
			if sum.PermissionDenials == nil {
				sum.PermissionDenials = []phases.AgentPermissionDenial{}
			}
			assert.Equal(t, want, sum)
		})
	}
}

func TestGeminiParserEdgeCases(t *testing.T) {
	t.Run("malformed and unknown lines are text or system", func(t *testing.T) {
		p := NewGeminiParser()
		assert.Equal(t, parsedLine{txt, "not json"}, pair(p.ParseLine("not json")))
		assert.Equal(t, parsedLine{txt, `{"no":"type"}`}, pair(p.ParseLine(`{"no":"type"}`)))
		assert.Equal(t, parsedLine{sys, "future"}, pair(p.ParseLine(`{"type":"future"}`)))
		assert.Equal(t, Summary{}, p.Summary())
	})
	t.Run("an invalid stream: an error event, then a result without an error object", func(t *testing.T) {
		p := NewGeminiParser()
		parseAll(p, []string{
			`{"type":"init","session_id":"s","model":"gemini-2.5-pro"}`,
			`{"type":"error","severity":"error","message":"Model stream ended with empty response text."}`,
			`{"type":"result","status":"error","stats":{"input_tokens":10,"output_tokens":0,"cached":4,"input":6}}`,
		})
		s := p.Summary()
		assert.Equal(t, "Model stream ended with empty response text.", s.AgentError)
		assert.Nil(t, s.APIError)
		assert.Equal(t, phases.TokenUsage{Input: 6, CacheRead: 4}, s.Tokens)
		assert.Equal(t, "gemini-2.5-pro", s.Model)
	})
	t.Run("a warning does not fail the run; a killed run has no error", func(t *testing.T) {
		p := NewGeminiParser()
		parseAll(p, []string{
			`{"type":"init","session_id":"s","model":"auto"}`,
			`{"type":"error","severity":"warning","message":"Agent execution blocked: hook"}`,
			`{"type":"message","role":"assistant","content":"Hal","delta":true}`,
			`{"type":"message","role":"assistant","content":"f done","delta":true}`,
		})
		s := p.Summary()
		assert.Empty(t, s.AgentError)
		assert.Equal(t, "Half done", s.Result)
		assert.Equal(t, "auto", s.Model)
	})
	t.Run("refusals: policy, path outside the workspace, an MCP tool left out; a failed command is not one", func(t *testing.T) {
		p := NewGeminiParser()
		parseAll(p, []string{
			`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"a","parameters":{"command":"rm -rf /"}}`,
			`{"type":"tool_result","tool_id":"a","status":"error","error":{"type":"policy_violation","message":"denied by policy"}}`,
			`{"type":"tool_use","tool_name":"write_file","tool_id":"b","parameters":{"file_path":"/repo/.foreman/results/r.json","content":"{}"}}`,
			`{"type":"tool_result","tool_id":"b","status":"error","error":{"type":"invalid_tool_params","message":"Path not in workspace: Attempted path \"/repo/.foreman/results/r.json\" resolves outside the allowed workspace directories"}}`,
			`{"type":"tool_use","tool_name":"mcp_foreman_report","tool_id":"c","parameters":{"outcome":"done"}}`,
			`{"type":"tool_result","tool_id":"c","status":"error","error":{"type":"tool_not_registered","message":"Tool \"mcp_foreman_report\" not found."}}`,
			`{"type":"tool_use","tool_name":"run_shell_command","tool_id":"d","parameters":{"command":"false"}}`,
			`{"type":"tool_result","tool_id":"d","status":"error","error":{"type":"shell_execute_error","message":"exit 1"}}`,
			`{"type":"tool_use","tool_name":"made_up","tool_id":"e","parameters":{}}`,
			`{"type":"tool_result","tool_id":"e","status":"error","error":{"type":"tool_not_registered","message":"Tool \"made_up\" not found."}}`,
		})
		assert.Equal(t, []phases.AgentPermissionDenial{
			{Tool: "run_shell_command", Input: "rm -rf /"},
			{Tool: "write_file", Input: "/repo/.foreman/results/r.json"},
			{Tool: "mcp_foreman_report", Input: `{"outcome":"done"}`},
		}, p.Summary().PermissionDenials)
	})
	t.Run("API errors by status", func(t *testing.T) {
		for msg, want := range map[string]*phases.AgentAPIError{
			`[API Error: The model is overloaded. (Status: UNAVAILABLE)]`:                     {Code: "server_error"},
			`[API Error: {"error":{"code":500,"message":"x","status":"INTERNAL"}}]`:           {Code: "server_error", Status: 500},
			`[API Error: {"error":{"code":400,"message":"bad","status":"INVALID_ARGUMENT"}}]`: {Code: "invalid_request", Status: 400},
			`[API Error: models/x is not found (Status: NOT_FOUND)]`:                          {Code: "model_not_found"},
		} {
			rl, e := classifyGeminiError(msg)
			assert.Nil(t, rl, msg)
			want.Message = msg
			assert.Equal(t, want, e, msg)
		}
		rl, e := classifyGeminiError(`[API Error: Quota exceeded (Status: RESOURCE_EXHAUSTED)]`)
		assert.Nil(t, e)
		assert.NotNil(t, rl)
	})
	t.Run("a quota's suggested retry names the reset", func(t *testing.T) {
		now := time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)
		at, ok := resolveReset("[API Error: x\nSuggested retry after 3600s.]", now)
		require.True(t, ok)
		assert.Equal(t, now.Add(time.Hour), at)
	})
}

func pair(k phases.StreamKind, s string) parsedLine { return parsedLine{k, s} }
