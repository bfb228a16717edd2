package agentcmd

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// A CLI retrying a refused key (401) is stopped at its first retry line,
// with the cause, instead of retrying for minutes: each case replays the
// recording of the real CLI up to its first retry, then hangs as the CLI
// would while it waits.
func TestARefusedKeyStopsTheAgentAtOnce(t *testing.T) {
	for _, tt := range []struct {
		format    Format
		recording string
		says      string
	}{
		{FormatClaude, "claude_401.jsonl", "model API 401 authentication_failed: retry 1 of 2"},
		{FormatCodex, "codex_401.jsonl", "Reconnecting... 1/2 (unexpected status 401 Unauthorized"},
	} {
		t.Run(string(tt.format), func(t *testing.T) {
			lines := firstLinesThrough(t, filepath.Join("testdata", "recorded", tt.recording), `"subtype":"api_retry"`, "Reconnecting...")
			dir := t.TempDir()
			require.NoError(t, os.WriteFile(filepath.Join(dir, "out.jsonl"), []byte(lines), 0o644))
			agent := writeScript(t, dir, "cli", `cat "$(dirname "$0")/out.jsonl"; exec sleep 600`)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			res, err := New(Config{Argv: []string{agent}, Format: tt.format, KillGrace: time.Second, Sandbox: Sandbox{Mode: SandboxOff}}).Execute(ctx,
				phases.AgentRequest{WorkspacePath: dir, TaskPrompt: "p"}, nil)
			require.NoError(t, err)
			require.NoError(t, ctx.Err(), "stopped at once, not after the CLI's retries")
			assert.False(t, res.Success)
			assert.Contains(t, res.Error, "stopped at once: the model API answered ")
			assert.Contains(t, res.Error, tt.says)
			require.NotNil(t, res.APIError)
			assert.Equal(t, 401, res.APIError.Status)
		})
	}
}

// firstLinesThrough returns the recording's lines up to the first one
// holding any of marks.
func firstLinesThrough(t *testing.T, path string, marks ...string) string {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var b strings.Builder
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<24)
	for sc.Scan() {
		b.WriteString(sc.Text() + "\n")
		for _, m := range marks {
			if strings.Contains(sc.Text(), m) {
				return b.String()
			}
		}
	}
	t.Fatalf("%s has no line with %q", path, marks)
	return ""
}
