package agentcmd

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	// The zone names Claude Code prints with a reset time are read with
	// time.LoadLocation; embedding the zone database keeps this test
	// independent of the machine's tzdata.
	_ "time/tzdata"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
)

// TestParsersRecogniseWhyAnAgentStopped runs the parsers over the fixtures of
// agents that met a rate limit, an API error, a refused permission or a
// question for a person (testdata/README.md names the source of each) and
// checks the typed conditions of the summary.
func TestParsersRecogniseWhyAnAgentStopped(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		newParser func() OutputParser
		rateLimit *phases.AgentRateLimit
		apiError  *phases.AgentAPIError
		denials   []phases.AgentPermissionDenial
		questions []phases.AgentQuestion
		agentErr  string
	}{
		{
			name: "claude rate_limit_event rejected", fixture: "claude_rate_limit_event.jsonl", newParser: NewClaudeParser,
			rateLimit: &phases.AgentRateLimit{ResetsAt: time.Unix(1771390800, 0), Window: "five_hour",
				Message: "You've hit your limit · resets 5am (UTC)"},
			agentErr: "rate_limit: You've hit your limit · resets 5am (UTC)",
		},
		{
			name: "claude rate limit named only in words", fixture: "claude_rate_limited.jsonl", newParser: NewClaudeParser,
			rateLimit: &phases.AgentRateLimit{Message: "You've hit your limit · resets 12pm (America/Chicago)"},
			agentErr:  "rate_limit: You've hit your limit · resets 12pm (America/Chicago)",
		},
		{
			name: "claude API error", fixture: "claude_api_error.jsonl", newParser: NewClaudeParser,
			apiError: &phases.AgentAPIError{Code: "server_error", Status: 529,
				Message: `API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`},
			agentErr: `server_error: API Error: 529 {"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}`,
		},
		{
			name: "claude AskUserQuestion refused", fixture: "claude_ask_user_question.jsonl", newParser: NewClaudeParser,
			questions: []phases.AgentQuestion{{Tool: "AskUserQuestion", Text: "Which language do you prefer? (Go / Rust)"}},
		},
		{
			name: "claude Bash refused", fixture: "claude_permission_denied.jsonl", newParser: NewClaudeParser,
			denials: []phases.AgentPermissionDenial{{Tool: "Bash", Input: "make release"}},
		},
		{
			name: "claude permission prompt left waiting", fixture: "claude_permission_prompt.jsonl", newParser: NewClaudeParser,
			questions: []phases.AgentQuestion{{Tool: "can_use_tool", Text: "Allow Bash: rm -rf build/?"}},
		},
		{
			name: "codex usage limit", fixture: "codex_usage_limit.jsonl", newParser: NewCodexParser,
			rateLimit: &phases.AgentRateLimit{Message: "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:28 PM."},
			agentErr:  "You've hit your usage limit. Visit https://chatgpt.com/codex/settings/usage to purchase more credits or try again at 3:28 PM.",
		},
		{
			name: "codex request_user_input", fixture: "codex_request_user_input.jsonl", newParser: NewCodexParser,
			questions: []phases.AgentQuestion{{Tool: "request_user_input", Text: "Should the migration keep the old users table? (Keep it / Drop it)"}},
		},
		{
			name: "codex command declined", fixture: "codex_command_declined.jsonl", newParser: NewCodexParser,
			denials: []phases.AgentPermissionDenial{{Tool: "command", Input: "bash -lc 'git push --force origin main'"}},
		},
		{
			name: "codex stream failure is an API error", fixture: "codex_turn_failed.jsonl", newParser: NewCodexParser,
			apiError: &phases.AgentAPIError{Code: "connection_error",
				Message: "stream disconnected before completion: Transport error: error decoding response body"},
			agentErr: "stream disconnected before completion: Transport error: error decoding response body",
		},
		{name: "claude success says nothing", fixture: "claude_success.jsonl", newParser: NewClaudeParser},
		{name: "codex recovered error says nothing", fixture: "codex_recovered.jsonl", newParser: NewCodexParser},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.newParser()
			parseAll(p, fixtureLines(t, tt.fixture))
			s := p.Summary()
			assert.Equal(t, tt.rateLimit, s.RateLimit)
			assert.Equal(t, tt.apiError, s.APIError)
			assert.Equal(t, tt.denials, nilIfEmpty(s.PermissionDenials))
			assert.Equal(t, tt.questions, nilIfEmpty(s.Questions))
			assert.Equal(t, tt.agentErr, s.AgentError)
		})
	}
}

func nilIfEmpty[T any](s []T) []T {
	if len(s) == 0 {
		return nil
	}
	return s
}

func TestClaudeParserOtherWaysToWait(t *testing.T) {
	t.Run("a hook deferred a tool call", func(t *testing.T) {
		p := NewClaudeParser()
		p.ParseLine(`{"type":"result","subtype":"success","is_error":false,"session_id":"s","deferred_tool_use":{"id":"toolu_1","name":"Write","input":{"file_path":"/tmp/ws/prod.env"}}}`)
		assert.Equal(t, []phases.AgentQuestion{{Tool: "Write", Text: "Allow Write: /tmp/ws/prod.env?"}}, p.Summary().Questions)
	})
	t.Run("a question still open when the run ends", func(t *testing.T) {
		p := NewClaudeParser()
		p.ParseLine(`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{"questions":[{"question":"Deploy now?","header":"Deploy"}]}}]}}`)
		assert.Equal(t, []phases.AgentQuestion{{Tool: "AskUserQuestion", Text: "Deploy now?"}}, p.Summary().Questions)
	})
	t.Run("an answered question is not waiting", func(t *testing.T) {
		p := NewClaudeParser()
		p.ParseLine(`{"type":"assistant","message":{"id":"m1","model":"claude-sonnet-4-5","content":[{"type":"tool_use","id":"toolu_q","name":"AskUserQuestion","input":{"questions":[{"question":"Deploy now?"}]}}]}}`)
		p.ParseLine(`{"type":"user","message":{"role":"user","content":[{"type":"tool_result","tool_use_id":"toolu_q","content":"yes"}]}}`)
		assert.Empty(t, p.Summary().Questions)
	})
	t.Run("a rejected limit lifted again", func(t *testing.T) {
		p := NewClaudeParser()
		p.ParseLine(`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1771390800},"uuid":"u","session_id":"s"}`)
		p.ParseLine(`{"type":"rate_limit_event","rate_limit_info":{"status":"allowed"},"uuid":"u2","session_id":"s"}`)
		assert.Nil(t, p.Summary().RateLimit)
	})
}

func TestResolveReset(t *testing.T) {
	chicago, err := time.LoadLocation("America/Chicago")
	require.NoError(t, err)
	now := time.Date(2026, 3, 10, 9, 15, 0, 0, time.UTC) // 04:15 in Chicago
	tests := []struct {
		msg  string
		want time.Time
		ok   bool
	}{
		{"You've hit your limit · resets 12pm (America/Chicago)", time.Date(2026, 3, 10, 12, 0, 0, 0, chicago), true},
		{"You've hit your limit · resets 3am (America/Chicago)", time.Date(2026, 3, 11, 3, 0, 0, 0, chicago), true},
		{"resets 5:30pm", time.Date(2026, 3, 10, 17, 30, 0, 0, time.UTC), true},
		{"You've hit your weekly limit · resets Mar 14, 10am (UTC)", time.Date(2026, 3, 14, 10, 0, 0, 0, time.UTC), true},
		{"You've hit your usage limit. Try again at 3:28 PM.", time.Date(2026, 3, 10, 15, 28, 0, 0, time.UTC), true},
		{"You've hit your usage limit. Try again at 8:05 AM.", time.Date(2026, 3, 11, 8, 5, 0, 0, time.UTC), true},
		{"or try again at Aug 8th, 2026 12:30 PM.", time.Date(2026, 8, 8, 12, 30, 0, 0, time.UTC), true},
		{"send a request to your admin or try again in 3 days 6 hours 57 minutes.", now.Add(78*time.Hour + 57*time.Minute), true},
		{"You've hit your usage limit. Try again later.", time.Time{}, false},
		{"resets 12pm (Not/AZone)", time.Time{}, false},
		{"resets 13pm", time.Time{}, false},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			got, ok := resolveReset(tt.msg, now)
			assert.Equal(t, tt.ok, ok)
			assert.True(t, tt.want.Equal(got), "got %v, want %v", got, tt.want)
		})
	}
}

func TestClassifyCodexError(t *testing.T) {
	tests := []struct {
		msg     string
		limited bool
		code    string
		status  int
	}{
		{"You've hit your usage limit. Try again later.", true, "", 0},
		{"exceeded retry limit, last status: 429 Too Many Requests", true, "", 0},
		{"exceeded retry limit, last status: 503 Service Unavailable", false, "server_error", 503},
		{"Quota exceeded. Check your plan and billing details.", false, "billing_error", 0},
		{"We're currently experiencing high demand, which may cause temporary errors.", false, "server_error", 0},
		{"unexpected status 401 Unauthorized: {}", false, "authentication_failed", 401},
		{"Codex ran out of room in the model's context window. Start a new conversation or clear earlier history before retrying.", false, "context_window_exceeded", 0},
		{"something else", false, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.msg, func(t *testing.T) {
			rl, apiErr := classifyCodexError(tt.msg)
			if tt.limited {
				require.NotNil(t, rl)
				assert.Nil(t, apiErr)
				return
			}
			require.NotNil(t, apiErr)
			assert.Nil(t, rl)
			assert.Equal(t, tt.code, apiErr.Code)
			assert.Equal(t, tt.status, apiErr.Status)
			assert.Equal(t, tt.msg, apiErr.Message)
		})
	}
}

// TestExecuteReportsWhyTheAgentStopped runs the fixtures through a real
// subprocess and checks the result's typed fields, the reset times named in
// words read against the driver's clock.
func TestExecuteReportsWhyTheAgentStopped(t *testing.T) {
	fake := clock.NewFake(time.Date(2026, 3, 10, 9, 15, 0, 0, time.UTC))
	t.Run("codex usage limit, reset read in the clock's zone", func(t *testing.T) {
		ws := fakeAgent(t, "codex", "codex_usage_limit.jsonl", 1)
		pids := make(chan int, 1)
		res, err := New(Config{Format: FormatCodex, Clock: fake}).Execute(context.Background(),
			phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x", OnStart: func(pid int) { pids <- pid }}, nil)
		require.NoError(t, err)
		assert.False(t, res.Success)
		require.NotNil(t, res.RateLimit)
		assert.Equal(t, time.Date(2026, 3, 10, 15, 28, 0, 0, time.UTC), res.RateLimit.ResetsAt)
		assert.Nil(t, res.APIError)
		assert.Positive(t, <-pids, "OnStart gets the agent's pid")
	})
	t.Run("claude question", func(t *testing.T) {
		ws := fakeAgent(t, "claude", "claude_ask_user_question.jsonl", 0)
		res, err := New(Config{Format: FormatClaude, Clock: fake}).Execute(context.Background(),
			phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x"}, nil)
		require.NoError(t, err)
		assert.True(t, res.Success, "the run itself succeeded; the question is reported beside it")
		assert.Equal(t, []phases.AgentQuestion{{Tool: "AskUserQuestion", Text: "Which language do you prefer? (Go / Rust)"}}, res.Questions)
	})
	t.Run("claude rate limit with resetsAt", func(t *testing.T) {
		ws := fakeAgent(t, "claude", "claude_rate_limit_event.jsonl", 1)
		res, err := New(Config{Format: FormatClaude, Clock: fake}).Execute(context.Background(),
			phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x"}, nil)
		require.NoError(t, err)
		require.NotNil(t, res.RateLimit)
		assert.True(t, time.Unix(1771390800, 0).Equal(res.RateLimit.ResetsAt))
		assert.Equal(t, "five_hour", res.RateLimit.Window)
	})
}

func TestClaudeAPIRetryIsAWaitNotSilence(t *testing.T) {
	tests := []struct{ name, line, want string }{
		{"rate limited", `{"type":"system","subtype":"api_retry","attempt":3,"max_retries":10,"retry_delay_ms":31250,"error_status":429,"error":"rate_limit","session_id":"s","uuid":"u"}`,
			"model API 429 rate_limit: retry 3 of 10 in 31.3s"},
		{"overloaded", `{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":529,"error":"overloaded","session_id":"s"}`,
			"model API 529 overloaded: retry 1 of 10 in 500ms"},
		{"without a status", `{"type":"system","subtype":"api_retry","attempt":2,"session_id":"s"}`, "model API: retry 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewClaudeParser()
			kind, text := p.ParseLine(tt.line)
			assert.Equal(t, phases.StreamRetry, kind)
			assert.Equal(t, tt.want, text)
			// Retrying is not giving up: the run's outcome is the result's.
			assert.Nil(t, p.Summary().RateLimit)
			assert.Nil(t, p.Summary().APIError)
		})
	}
}
