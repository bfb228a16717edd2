package agentcmd_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// Gemini CLI announces its retries on stderr only (recorded:
// testdata/recorded/gemini_retry_*.stderr): the driver makes each a
// StreamRetry event, as it does Claude Code's api_retry, and leaves the
// stack trace that follows it stderr.
func TestGeminiRetriesOnStderrAreRetryEvents(t *testing.T) {
	for _, tc := range []struct{ fixture, want string }{
		{"gemini_retry_429", "model API 429 RESOURCE_EXHAUSTED: retry 1 of 9"},
		{"gemini_retry_500", "model API 500 INTERNAL: retry 1 of 9"},
	} {
		t.Run(tc.fixture, func(t *testing.T) {
			// The recordings go beside the script, where a sandboxed run
			// would see them too (a checkout under /tmp is hidden in one).
			bin := t.TempDir()
			for _, ext := range []string{".jsonl", ".stderr"} {
				b, err := os.ReadFile(filepath.Join("testdata", "recorded", tc.fixture+ext))
				require.NoError(t, err)
				require.NoError(t, os.WriteFile(filepath.Join(bin, "out"+ext), b, 0o644))
			}
			script := "#!/bin/sh\ncat >/dev/null\ncat \"$(dirname \"$0\")/out.stderr\" >&2\ncat \"$(dirname \"$0\")/out.jsonl\"\n"
			require.NoError(t, os.WriteFile(filepath.Join(bin, "gemini"), []byte(script), 0o755))
			d := agentcmd.New(agentcmd.Config{Format: agentcmd.FormatGemini, Argv: []string{filepath.Join(bin, "gemini")},
				Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
			var mu sync.Mutex
			var retries []string
			stderrLines := 0
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "hi"},
				func(ev phases.StreamEvent) {
					mu.Lock()
					defer mu.Unlock()
					switch ev.Kind {
					case phases.StreamRetry:
						retries = append(retries, ev.Text)
						assert.True(t, strings.HasPrefix(ev.Line, "Attempt 1 failed"), ev.Line)
					case phases.StreamStderr:
						stderrLines++
					}
				})
			require.NoError(t, err)
			assert.True(t, res.Success)
			assert.Equal(t, "Answered after the error.", res.Result)
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, []string{tc.want}, retries)
			assert.Positive(t, stderrLines, "the rest of stderr (the stack trace) stays stderr")
		})
	}
}

// The real Gemini CLI through the driver: a 429 it retries by itself (after
// its own 5 s backoff) is a StreamRetry event, and the run goes on.
func TestRealGeminiRetryIsARetryEvent(t *testing.T) {
	srv := modeltest.Start(t, modeltest.Script{Turns: []modeltest.Turn{modeltest.RateLimited(0), modeltest.Say("after the retry")}})
	var mu sync.Mutex
	var retries []string
	res, err := geminiDriver(t, srv).Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "hi"},
		func(ev phases.StreamEvent) {
			if ev.Kind == phases.StreamRetry {
				mu.Lock()
				retries = append(retries, ev.Text)
				mu.Unlock()
			}
		})
	require.NoError(t, err)
	require.True(t, res.Success, "%s\n%s", res.Error, res.Stderr)
	assert.Equal(t, "after the retry", res.Result)
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []string{"model API 429 RESOURCE_EXHAUSTED: retry 1 of 9"}, retries)
}
