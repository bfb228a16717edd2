package agentcmd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// TestParsersOnPublishedOutput runs the parsers over the fixtures made from
// output the agents are published to print; testdata/README.md names the
// source of each. The parsers before these fixtures were added got the
// tokens of a Claude Code run with subagents (result.usage counts the main
// conversation only), the model and error of a rate-limited Claude Code run
// ("<synthetic>", "success: ..."), and everything of the older Codex stream
// wrong.
func TestParsersOnPublishedOutput(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		newParser func() OutputParser
		want      Summary
		kinds     []phases.StreamKind
		texts     map[int]string
	}{
		{
			name: "claude run with subagents", fixture: "claude_subagents.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID: "6170607e-7232-407c-82c3-7fc983d60064",
				Result:    "**My question for you:** Would you like me to help create unit tests for your Claude Clean Output parser using the best practices from the 2025 guidelines (table-driven tests, mocking, 61-80% coverage)?",
				Model:     "claude-sonnet-4-5-20250929",
				// modelUsage summed: haiku 7460/1331/18159/14048 plus sonnet
				// 124/2373/67600/29631, not usage's 16/956/58826/11907.
				Tokens:   phases.TokenUsage{Input: 7584, Output: 3704, CacheRead: 85759, CacheWrite: 43679},
				CostUSD:  0.21085415,
				NumTurns: 19,
			},
			kinds: []phases.StreamKind{sys, txt, tool, tool, tool, tool, tool, tool, tool, tool, tool, txt, tool, tool, txt, res},
			texts: map[int]string{
				0: "session 6170607e-7232-407c-82c3-7fc983d60064 started (model claude-sonnet-4-5-20250929)",
				3: "Task Explore codebase structure",
				7: "Read /home/user/project/go.mod",
				8: "Bash ls -la /home/user/project/mocks",
			},
		},
		{
			name: "claude rate limited", fixture: "claude_rate_limited.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID:  "71b47827-9527-47f3-8614-34249f877747",
				Result:     "You've hit your limit · resets 12pm (America/Chicago)",
				Model:      "claude-opus-4-6",
				NumTurns:   1,
				AgentError: "rate_limit: You've hit your limit · resets 12pm (America/Chicago)",
				RateLimit:  &phases.AgentRateLimit{Message: "You've hit your limit · resets 12pm (America/Chicago)"},
			},
			kinds: []phases.StreamKind{sys, txt, res},
			texts: map[int]string{1: "You've hit your limit · resets 12pm (America/Chicago)"},
		},
		{
			name: "claude resume of an unknown session", fixture: "claude_resume_not_found.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID:  "00000000-0000-0000-0000-000000000000",
				AgentError: "error_during_execution: No conversation found with session ID: 00000000-0000-0000-0000-000000000000",
			},
			kinds: []phases.StreamKind{res},
			texts: map[int]string{0: "error_during_execution"},
		},
		{
			name: "codex exec docs sample", fixture: "codex_exec_doc_sample.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:        "0199a213-81c0-7800-8aa1-bbab2a035a53",
				Result:           "Yep — there’s a `README.md` in the repository root.",
				Tokens:           phases.TokenUsage{Input: 315, Output: 122, CacheRead: 24448},
				CumulativeTokens: true,
				NumTurns:         1,
			},
			kinds: []phases.StreamKind{sys, sys, rsn, tool, tool, rsn, txt, res},
			texts: map[int]string{
				3: "$ bash -lc ls",
				4: "$ bash -lc ls (exit 0)",
				7: "turn completed; thread total 24763 input (24448 cached), 122 output tokens",
			},
		},
		{
			name: "codex older msg stream", fixture: "codex_legacy.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID: "f47e4fde-f03b-498c-9abb-be8247bbd7a9",
				Result:    "Hi there! The workspace holds README.md.",
				Model:     "codex-mini-latest",
				// Two responses, each token_count its own: 3804 + (4012 - 3712
				// cached) input, 95 + 30 output.
				Tokens:   phases.TokenUsage{Input: 4104, Output: 125, CacheRead: 3712},
				NumTurns: 1,
			},
			kinds: []phases.StreamKind{txt, txt, sys, sys, rsn, tool, tool, sys, txt, sys, res},
			texts: map[int]string{
				2:  "session f47e4fde-f03b-498c-9abb-be8247bbd7a9 configured (model codex-mini-latest)",
				5:  "$ bash -lc ls",
				6:  "command exited 0",
				10: "Hi there! The workspace holds README.md.",
			},
		},
		{
			name: "codex older msg stream with an error", fixture: "codex_legacy_error.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:        "0199b5c7-2d41-7a10-9f3e-4c2d1b0a9e88",
				Model:            "gpt-5-codex",
				Tokens:           phases.TokenUsage{Input: 6, Output: 7, CacheRead: 4},
				CumulativeTokens: true,
				NumTurns:         1,
				AgentError:       "stream disconnected before completion: Transport error: error decoding response body",
				APIError:         &phases.AgentAPIError{Code: "connection_error", Message: "stream disconnected before completion: Transport error: error decoding response body"},
			},
			kinds: []phases.StreamKind{sys, sys, sys, sys, sys, sys, res},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := tt.newParser()
			got := parseAll(p, fixtureLines(t, tt.fixture))
			assert.Equal(t, tt.kinds, kinds(got))
			for i, want := range tt.texts {
				require.Less(t, i, len(got))
				assert.Equal(t, want, got[i].text, "line %d", i)
			}
			want := tt.want
			if _, claude := p.(*claudeParser); claude && strings.Contains(strings.Join(fixtureLines(t, tt.fixture), "\n"), `"type":"result"`) {
				want.CumulativeTokens, want.CumulativeCost = true, true // a result's totals are the session's
			}
			assert.Equal(t, want, p.Summary())
		})
	}
}

// A run killed before its result line: tokens from the messages seen, each
// message id once, subagents' included; the model stays the main
// conversation's although a subagent on another model spoke last.
func TestClaudeParserWithoutResultKeepsTheMainModel(t *testing.T) {
	lines := fixtureLines(t, "claude_subagents.jsonl")
	p := NewClaudeParser()
	parseAll(p, lines[:9]) // the last is the haiku subagent's Bash call
	s := p.Summary()
	assert.Equal(t, "claude-sonnet-4-5-20250929", s.Model)
	// msg_01Rws 3/1/14723/3117, msg_01DGbA3 3/1/0/3123, msg_01UkBf
	// 6880/1/5968/576.
	assert.Equal(t, phases.TokenUsage{Input: 6886, Output: 3, CacheRead: 20691, CacheWrite: 6816}, s.Tokens)
	assert.Empty(t, s.AgentError)
}

// The API error an assistant message reports is the agent's error when the
// run ends before its result line.
func TestClaudeParserAPIErrorWithoutResult(t *testing.T) {
	lines := fixtureLines(t, "claude_rate_limited.jsonl")
	p := NewClaudeParser()
	parseAll(p, lines[:2])
	s := p.Summary()
	assert.Equal(t, "rate_limit: You've hit your limit · resets 12pm (America/Chicago)", s.AgentError)
	assert.Equal(t, "claude-opus-4-6", s.Model)
}

func TestClaudeResultErrorText(t *testing.T) {
	tests := []struct {
		name string
		line string
		want string
	}{
		{"is_error with a success subtype", `{"type":"result","subtype":"success","is_error":true,"result":"Not logged in · Please run /login"}`, "Not logged in · Please run /login"},
		{"error subtype with errors", `{"type":"result","subtype":"error_max_turns","is_error":true,"errors":["Reached maximum number of turns (3)"]}`, "error_max_turns: Reached maximum number of turns (3)"},
		{"error subtype alone", `{"type":"result","subtype":"error_during_execution","is_error":true}`, "error_during_execution"},
		{"nothing said", `{"type":"result","is_error":true}`, "error"},
		{"not an error", `{"type":"result","subtype":"success","is_error":false,"result":"done"}`, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := NewClaudeParser()
			p.ParseLine(tt.line)
			assert.Equal(t, tt.want, p.Summary().AgentError)
		})
	}
}

// With modelUsage absent, the model is the one that cost the most.
func TestClaudeModelFromModelUsage(t *testing.T) {
	p := NewClaudeParser()
	p.ParseLine(`{"type":"result","subtype":"success","result":"ok","modelUsage":{` +
		`"claude-haiku-4-5-20251001":{"inputTokens":10,"outputTokens":1,"costUSD":0.001},` +
		`"claude-sonnet-4-5-20250929":{"inputTokens":5,"outputTokens":2,"costUSD":0.01},` +
		`"bad":"not an object"}}`)
	s := p.Summary()
	assert.Equal(t, "claude-sonnet-4-5-20250929", s.Model)
	assert.Equal(t, phases.TokenUsage{Input: 15, Output: 3}, s.Tokens)
}

// turn.completed carries the thread's running total, so a second one
// replaces the first rather than adding to it (numbers from a live probe of
// codex-cli 0.142.4, gitmoot/gitmoot#661).
func TestCodexParserTakesTheLastRunningTotal(t *testing.T) {
	p := NewCodexParser()
	parseAll(p, fixtureLines(t, "codex_resume_run1.jsonl"))
	parseAll(p, fixtureLines(t, "codex_resume_run2.jsonl")[1:])
	s := p.Summary()
	assert.Equal(t, phases.TokenUsage{Input: 85681, Output: 40}, s.Tokens)
	assert.True(t, s.CumulativeTokens)
	assert.Equal(t, 2, s.NumTurns)
}

// With no agent message, a completed plan is the result, as in the Codex
// SDK's Thread.run.
func TestCodexParserPlanIsTheResultWithoutAMessage(t *testing.T) {
	p := NewCodexParser()
	parseAll(p, []string{
		`{"type":"thread.started","thread_id":"t-1"}`,
		`{"type":"item.plan.delta","item_id":"item_0","delta":"1. Add a test"}`,
		`{"type":"item.completed","item":{"id":"item_0","type":"plan","text":"1. Add a test\n2. Fix Add"}}`,
		`{"type":"turn.completed","usage":{"input_tokens":10,"cached_input_tokens":0,"output_tokens":5}}`,
	})
	assert.Equal(t, "1. Add a test\n2. Fix Add", p.Summary().Result)

	p = NewCodexParser()
	parseAll(p, []string{
		`{"type":"item.completed","item":{"id":"item_0","type":"plan","text":"the plan"}}`,
		`{"type":"item.completed","item":{"id":"item_1","type":"agent_message","text":"the answer"}}`,
	})
	assert.Equal(t, "the answer", p.Summary().Result)
}

// A resumed Codex thread reports the thread's running total; the driver
// charges the run only the difference from the total it last saw.
func TestExecuteCodexResumedChargesOnlyItsOwnTokens(t *testing.T) {
	const thread = "019bd4f0-8c21-7a3e-9f55-6d2c8b4e1a90"
	run := func(d *Driver, fixture, session string) phases.AgentResult {
		t.Helper()
		ws := fakeAgent(t, "codex", fixture, 0)
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x", SessionID: session}, nil)
		require.NoError(t, err)
		require.True(t, res.Success)
		return res
	}
	d := New(Config{Format: FormatCodex})
	first := run(d, "codex_resume_run1.jsonl", "")
	assert.Equal(t, phases.TokenUsage{Input: 16504, Output: 20}, first.Tokens)
	assert.Equal(t, thread, first.SessionID)
	second := run(d, "codex_resume_run2.jsonl", thread)
	assert.Equal(t, phases.TokenUsage{Input: 85681 - 16504, Output: 40 - 20}, second.Tokens)

	// A driver that did not see the earlier run charges the whole total.
	assert.Equal(t, phases.TokenUsage{Input: 85681, Output: 40},
		run(New(Config{Format: FormatCodex}), "codex_resume_run2.jsonl", thread).Tokens)
	// A total below the remembered one did not grow from it: taken whole.
	assert.Equal(t, phases.TokenUsage{Input: 16504, Output: 20},
		run(d, "codex_resume_run1.jsonl", thread).Tokens)
}

func TestSessionTotalsForgetTheOldestPastTheBound(t *testing.T) {
	s := newSessionTotals()
	total := sessionSpend{phases.TokenUsage{Input: 100, Output: 10}, 0.5}
	for i := range maxRememberedSessions + 1 {
		s.charge("", fmt.Sprint("s", i), total)
	}
	more := sessionSpend{phases.TokenUsage{Input: 150, Output: 15}, 0.75}
	tokens, cost := s.charge("s1", "s1", more)
	assert.Equal(t, phases.TokenUsage{Input: 50, Output: 5}, tokens)
	assert.InDelta(t, 0.25, cost, 1e-9)
	tokens, cost = s.charge("s0", "s0", more)
	assert.Equal(t, more.tokens, tokens, "s0 was forgotten")
	assert.InDelta(t, 0.75, cost, 1e-9)
	assert.Len(t, s.totals, maxRememberedSessions)
	assert.Len(t, s.order, maxRememberedSessions)
}

// The older Codex events the fixtures do not show, shaped as the EventMsg
// types of openai/codex codex-rs/core/src/protocol.rs.
func TestCodexParserOlderEvents(t *testing.T) {
	tests := []struct {
		line string
		kind phases.StreamKind
		text string
	}{
		{`{"id":"1","msg":{"type":"agent_message_delta","delta":"Hel"}}`, txt, "Hel"},
		{`{"id":"1","msg":{"type":"agent_reasoning_delta","delta":"hmm"}}`, rsn, "hmm"},
		{`{"id":"1","msg":{"type":"exec_command_begin","call_id":"c","command":"go test ./..."}}`, tool, "$ go test ./..."},
		{`{"id":"1","msg":{"type":"exec_command_end","call_id":"c"}}`, tool, "command ended"},
		{`{"id":"1","msg":{"type":"patch_apply_begin","call_id":"p","auto_approved":true,"changes":{"b.go":{"update":{}},"a.go":{"add":{}}}}}`, tool, "files: a.go, b.go"},
		{`{"id":"1","msg":{"type":"patch_apply_begin","changes":["not","a","map"]}}`, tool, "files: "},
		{`{"id":"1","msg":{"type":"patch_apply_end","call_id":"p","success":false}}`, tool, "patch failed"},
		{`{"id":"1","msg":{"type":"patch_apply_end","call_id":"p","success":true}}`, tool, "patch applied"},
		{`{"id":"1","msg":{"type":"mcp_tool_call_begin","call_id":"m","invocation":{"server":"docs","tool":"search"}}}`, tool, "mcp docs.search"},
		{`{"id":"1","msg":{"type":"web_search_end","call_id":"w","query":"go fuzzing"}}`, tool, "web search: go fuzzing"},
		{`{"id":"1","msg":{"type":"token_count","info":null}}`, sys, "token count"},
		{`{"id":"1","msg":{"type":"turn_diff","unified_diff":""}}`, sys, "turn_diff"},
		{`{"id":"1","msg":{"no_type":true}}`, txt, `{"id":"1","msg":{"no_type":true}}`},
		{`{"id":"1","msg":"not an object"}`, txt, `{"id":"1","msg":"not an object"}`},
	}
	for _, tt := range tests {
		kind, text := NewCodexParser().ParseLine(tt.line)
		assert.Equal(t, tt.kind, kind, tt.line)
		assert.Equal(t, tt.text, text, tt.line)
	}

	p := NewCodexParser()
	p.ParseLine(`{"id":"1","msg":{"type":"turn_aborted","reason":"interrupted"}}`)
	assert.Equal(t, "turn aborted: interrupted", p.Summary().AgentError)
}

// A line whose error field is not a string still decodes; only a string
// names an API error.
func TestClaudeParserErrorFieldOfAnotherType(t *testing.T) {
	p := NewClaudeParser()
	kind, text := p.ParseLine(`{"type":"assistant","error":{"code":1},"message":{"model":"claude-opus-4-6","content":[{"type":"text","text":"hi"}]}}`)
	assert.Equal(t, txt, kind)
	assert.Equal(t, "hi", text)
	assert.Empty(t, p.Summary().AgentError)
	assert.Equal(t, "claude-opus-4-6", p.Summary().Model)
}

// Claude Code's result after --resume counts the whole session in its
// modelUsage and total_cost_usd (recorded from the real CLI, 2.1.328): a
// resumed run is charged what it used itself, as its usage field says.
func TestExecuteClaudeResumedChargesOnlyItsOwnRun(t *testing.T) {
	const session = "2be55098-e27b-47eb-a489-35a9e42a5a6d"
	run := func(d *Driver, fixture, resume string) phases.AgentResult {
		t.Helper()
		ws := fakeAgent(t, "claude", filepath.Join("recorded", fixture), 0)
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x", SessionID: resume}, nil)
		require.NoError(t, err)
		require.True(t, res.Success)
		return res
	}
	d := New(Config{Format: FormatClaude})
	first := run(d, "claude_resume_run1.jsonl", "")
	assert.Equal(t, phases.TokenUsage{Input: 100, Output: 20}, first.Tokens)
	assert.InDelta(t, 0.0008, first.CostUSD, 1e-12)
	second := run(d, "claude_resume_run2.jsonl", session)
	assert.Equal(t, phases.TokenUsage{Input: 100, Output: 20}, second.Tokens, "200/40 in the session, 100/20 of them this run's")
	assert.InDelta(t, 0.0008, second.CostUSD, 1e-12)
}
