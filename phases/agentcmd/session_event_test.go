package agentcmd

import (
	"context"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// The first event after the CLI names its session carries the session id,
// once, so that a host can record it long before the run ends (recorded
// output of each real CLI).
func TestTheSessionIsAnnouncedOnce(t *testing.T) {
	for _, tc := range []struct{ format, fixture, session string }{
		{"claude", "recorded/claude_success.jsonl", "c333cc61-40ea-499d-90ba-16de834e8c5d"},
		{"codex", "recorded/codex_success.jsonl", ""},
		{"gemini", "recorded/gemini_success.jsonl", ""},
	} {
		t.Run(tc.format, func(t *testing.T) {
			ws := fakeAgent(t, tc.format, tc.fixture, 0)
			f, err := ParseFormat(tc.format)
			require.NoError(t, err)
			d := New(Config{Format: f, Sandbox: Sandbox{Mode: SandboxOff}})
			var mu sync.Mutex
			var announced []int
			n := 0
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "hi"}, func(ev phases.StreamEvent) {
				mu.Lock()
				defer mu.Unlock()
				if ev.Kind == phases.StreamStderr {
					return
				}
				if ev.SessionID != "" {
					assert.Equal(t, res0(ev), ev.SessionID)
					announced = append(announced, n)
				}
				n++
			})
			require.NoError(t, err)
			require.NotEmpty(t, res.SessionID)
			if tc.session != "" {
				assert.Equal(t, tc.session, res.SessionID)
			}
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []int{0}, announced, "the first line names it, once")
		})
	}
}

// res0 is the session id an event's raw line names (the first line of each
// recording has it).
func res0(ev phases.StreamEvent) string {
	for _, p := range []Summary{parseOne(NewClaudeParser(), ev.Line), parseOne(NewCodexParser(), ev.Line), parseOne(NewGeminiParser(), ev.Line)} {
		if p.SessionID != "" {
			return p.SessionID
		}
	}
	return ""
}

func parseOne(p OutputParser, line string) Summary {
	p.ParseLine(line)
	return p.Summary()
}
