package agentcmd

import (
	"bufio"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

func fixtureLines(t testing.TB, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("testdata", name))
	require.NoError(t, err)
	defer f.Close()
	var lines []string
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	require.NoError(t, sc.Err())
	return lines
}

type parsedLine struct {
	kind phases.StreamKind
	text string
}

func parseAll(p OutputParser, lines []string) []parsedLine {
	out := make([]parsedLine, 0, len(lines))
	for _, l := range lines {
		k, txt := p.ParseLine(l)
		out = append(out, parsedLine{k, txt})
	}
	return out
}

func kinds(pl []parsedLine) []phases.StreamKind {
	ks := make([]phases.StreamKind, len(pl))
	for i, p := range pl {
		ks[i] = p.kind
	}
	return ks
}

const (
	sys  = phases.StreamSystem
	txt  = phases.StreamText
	tool = phases.StreamToolUse
	res  = phases.StreamResult
	rsn  = phases.StreamReasoning
)

// TestParsersOnFixtures runs the parsers over the hand-written files in
// testdata, written to match the documented formats, not recorded from real
// runs (see testdata/README.md): Codex's from the ThreadEvent types in
// openai/codex codex-rs/exec/src/exec_events.rs, Claude Code's from the
// messages parsed by anthropics/claude-agent-sdk-python
// src/claude_agent_sdk/_internal/message_parser.py. They cover what real
// runs rarely show (malformed lines, every item type); the fixtures made from
// published real output are in TestParsersOnPublishedOutput.
func TestParsersOnFixtures(t *testing.T) {
	tests := []struct {
		name      string
		fixture   string
		newParser func() OutputParser
		want      Summary
		kinds     []phases.StreamKind
		// texts holds expected texts by line index, for the lines that matter.
		texts map[int]string
	}{
		{
			name: "claude success", fixture: "claude_success.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID: "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47",
				Result:    "Fixed the off-by-one in Add; the tests pass now.",
				Model:     "claude-sonnet-4-5-20250929",
				Tokens:    phases.TokenUsage{Input: 13, Output: 256, CacheRead: 43550, CacheWrite: 5650},
				CostUSD:   0.0412875,
				NumTurns:  5,
			},
			kinds: []phases.StreamKind{sys, rsn, txt, tool, tool, tool, tool, txt, res},
			texts: map[int]string{
				0: "session 3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47 started (model claude-sonnet-4-5-20250929)",
				1: "The failing test is in calc_test.go; read it first.",
				3: "Bash go test ./...",
				5: "Edit /tmp/ws/calc.go",
				6: "tool result: The file /tmp/ws/calc.go has been updated.",
				8: "Fixed the off-by-one in Add; the tests pass now.",
			},
		},
		{
			name: "claude error_max_turns", fixture: "claude_error_max_turns.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID:  "5d8e2f90-1a3b-4c5d-8e6f-7a8b9c0d1e2f",
				Model:      "claude-sonnet-4-5-20250929",
				Tokens:     phases.TokenUsage{Input: 5, Output: 60, CacheWrite: 4000},
				CostUSD:    0.0183,
				NumTurns:   2,
				AgentError: "error_max_turns: Reached maximum number of turns (1)",
			},
			kinds: []phases.StreamKind{sys, tool, tool, res},
			texts: map[int]string{3: "error_max_turns"},
		},
		{
			name: "claude malformed lines", fixture: "claude_malformed.jsonl", newParser: NewClaudeParser,
			want: Summary{
				SessionID: "7a9b0c1d-2e3f-4a5b-9c6d-7e8f9a0b1c2d",
				Result:    "done",
				Model:     "claude-haiku-4-5-20251001",
				Tokens:    phases.TokenUsage{Input: 10, Output: 5, CacheRead: 2000},
				CostUSD:   0.0009,
				NumTurns:  1,
			},
			kinds: []phases.StreamKind{sys, txt, txt, txt, txt, txt, txt, txt, sys, txt, txt, txt, res},
			texts: map[int]string{
				1:  "Warning: a plain diagnostic line in the middle of the stream",
				3:  "[1,2,3]",
				5:  "not an array",
				9:  "Hel",
				10: `{"type":"result","subtype":"success","is_error":false,"num_turns":"one","result":"done"}`,
			},
		},
		{
			name: "codex success", fixture: "codex_success.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:        "0199a213-81c0-7800-8aa1-bbab2a035a53",
				Result:           "Fixed the off-by-one in `Add`; `go test ./...` passes.",
				Tokens:           phases.TokenUsage{Input: 315, Output: 122, CacheRead: 24448},
				NumTurns:         1,
				CumulativeTokens: true,
			},
			kinds: []phases.StreamKind{sys, sys, rsn, tool, tool, sys, tool, sys, tool, tool, tool, sys, txt, sys, res},
			texts: map[int]string{
				2:  "**Running the tests to find the failure**",
				3:  "$ bash -lc 'go test ./...'",
				4:  "$ bash -lc 'go test ./...' (exit 1)",
				5:  "[ ] Fix Add\n[ ] Re-run tests",
				6:  "files: update /tmp/ws/calc.go (completed)",
				10: "mcp docs.search (completed)",
				11: "warning: model rerouted: gpt-5-codex -> gpt-5",
				14: "turn completed; thread total 24763 input (24448 cached), 122 output tokens",
			},
		},
		{
			name: "codex turn failed", fixture: "codex_turn_failed.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:  "0199b5c7-2d41-7a10-9f3e-4c2d1b0a9e88",
				NumTurns:   1,
				AgentError: "stream disconnected before completion: Transport error: error decoding response body",
				APIError:   &phases.AgentAPIError{Code: "connection_error", Message: "stream disconnected before completion: Transport error: error decoding response body"},
			},
			kinds: []phases.StreamKind{sys, sys, rsn, sys, res},
		},
		{
			name: "codex error then recovered turn", fixture: "codex_recovered.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:        "0199c0de-5e6f-7a80-b1c2-d3e4f5a6b7c8",
				Result:           "Done.",
				Tokens:           phases.TokenUsage{Input: 1000, Output: 20},
				NumTurns:         1,
				CumulativeTokens: true,
			},
			kinds: []phases.StreamKind{sys, sys, phases.StreamRetry, txt, res},
		},
		{
			name: "codex malformed lines", fixture: "codex_malformed.jsonl", newParser: NewCodexParser,
			want: Summary{
				SessionID:        "0199d1e2-f3a4-7b5c-8d6e-7f8091a2b3c4",
				Tokens:           phases.TokenUsage{Input: 40, Output: 5, CacheRead: 10},
				CumulativeTokens: true,
			},
			kinds: []phases.StreamKind{sys, txt, txt, sys, sys, txt, txt, sys, txt, res},
			texts: map[int]string{
				1: "not json at all",
				4: "brand_new_item",
				5: `{"type":"item.completed","item":{"id":"item_1","type":"command_execution","command":"ls","exit_code":"zero"}}`,
				8: "1. read code",
			},
		},
		{
			name: "text", fixture: "codex_turn_failed.jsonl", newParser: NewTextParser,
			kinds: []phases.StreamKind{txt, txt, txt, txt, txt},
			texts: map[int]string{1: `{"type":"turn.started"}`},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lines := fixtureLines(t, tt.fixture)
			p := tt.newParser()
			got := parseAll(p, lines)
			assert.Equal(t, tt.kinds, kinds(got))
			for i, want := range tt.texts {
				require.Less(t, i, len(got))
				assert.Equal(t, want, got[i].text, "line %d", i)
			}
			want := tt.want
			if _, claude := p.(*claudeParser); claude && strings.Contains(strings.Join(lines, "\n"), `"type":"result"`) {
				// A result's totals are the session's (see TestAResumedClaudeSessionIsChargedItsOwnRun).
				want.CumulativeTokens, want.CumulativeCost = true, true
			}
			assert.Equal(t, want, p.Summary())
		})
	}
}

func TestClaudeParserWithoutResultSumsMessageUsageOnce(t *testing.T) {
	lines := fixtureLines(t, "claude_success.jsonl")
	p := NewClaudeParser()
	parseAll(p, lines[:len(lines)-1]) // killed before the result line
	s := p.Summary()
	// Three distinct message ids; the first is repeated on three lines.
	assert.Equal(t, phases.TokenUsage{Input: 4 + 6 + 3, Output: 96 + 142 + 18, CacheRead: 11000 + 16120 + 16430, CacheWrite: 5120 + 310 + 220}, s.Tokens)
	assert.Equal(t, "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47", s.SessionID)
	assert.Empty(t, s.Result)
	assert.Empty(t, s.AgentError)
}

// Every prefix of every fixture line, fed to every parser, must parse
// without panicking, and a line that is not a JSON object comes back as
// itself.
func TestParsersNeverPanicOnTruncatedLines(t *testing.T) {
	parsers := map[string]func() OutputParser{"claude": NewClaudeParser, "codex": NewCodexParser, "text": NewTextParser}
	files, err := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	require.NoError(t, err)
	require.NotEmpty(t, files)
	for name, newParser := range parsers {
		p := newParser()
		for _, file := range files {
			for _, line := range fixtureLines(t, filepath.Base(file)) {
				for cut := 0; cut < len(line); cut += 11 {
					prefix := line[:cut]
					kind, text := p.ParseLine(prefix)
					if !strings.HasPrefix(strings.TrimSpace(prefix), "{") {
						assert.Equal(t, phases.StreamText, kind, "%s: %q", name, prefix)
						assert.Equal(t, prefix, text, "%s", name)
					}
				}
			}
		}
		_ = p.Summary()
	}
}

func FuzzParsers(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.jsonl"))
	for _, file := range files {
		for _, line := range fixtureLines(f, filepath.Base(file)) {
			f.Add(line)
		}
	}
	f.Fuzz(func(t *testing.T, line string) {
		for _, newParser := range []func() OutputParser{NewClaudeParser, NewCodexParser, NewTextParser} {
			p := newParser()
			p.ParseLine(line)
			p.ParseLine(line)
			_ = p.Summary()
		}
	})
}

func TestTailKeepsTheEnd(t *testing.T) {
	tl := newTail(10)
	tl.addLine("short")
	assert.Equal(t, "short\n", tl.String())
	for i := 0; i < 100; i++ {
		tl.addLine("line")
	}
	tl.addLine("last")
	s := tl.String()
	assert.True(t, strings.HasSuffix(s, "line\nlast\n"), s)
	assert.True(t, strings.HasPrefix(s, "[… 501 earlier bytes omitted …]\n"), s)

	// A cut inside a multi-byte rune starts the tail at the next rune.
	tu := newTail(4)
	tu.addLine("ééé") // 6 bytes and a newline; the last 4 are "\xa9é\n"
	assert.Equal(t, "[… 4 earlier bytes omitted …]\né\n", tu.String())
}
