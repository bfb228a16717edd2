package agentcmd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// An agent that prints past Config.MaxOutputBytes, on stdout or stderr,
// is stopped at once: its result fails and says why, a StreamSandbox note
// says so (a team counts it as a refusal), and nothing past the bound is
// parsed or kept. One below the bound runs to its end.
func TestAnOutputFloodStopsTheAgent(t *testing.T) {
	const limit = 256 << 10
	tests := []struct {
		name, script string
		flood        bool
	}{
		{"stdout, forever", `yes "$(printf '%0100d' 0)"`, true},
		{"stderr, forever", `yes "$(printf '%0100d' 0)" >&2`, true},
		{"one line longer than the bound", `head -c 600000 /dev/zero | tr '\0' x; echo; sleep 30`, true},
		{"below the bound", `i=0; while [ $i -lt 200 ]; do printf '%0100d\n' $i; i=$((i+1)); done; echo done`, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := writeScript(t, t.TempDir(), "agent", tt.script+"\n")
			rec := &recorder{}
			d := New(Config{Argv: []string{agent}, MaxOutputBytes: limit, OutputLimit: 4 << 10, Sandbox: Sandbox{Mode: SandboxOff}})
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, rec.callback)
			require.NoError(t, err)
			notes := rec.lines(phases.StreamSandbox)
			if !tt.flood {
				assert.True(t, res.Success, res.Error)
				assert.Empty(t, notes)
				return
			}
			assert.False(t, res.Success)
			assert.Equal(t, "stopped at once: the agent printed more than 256 KiB (Config.MaxOutputBytes): an output flood", res.Error)
			assert.Equal(t, []string{"agentcmd: output: stopped the agent: it printed more than 256 KiB (Config.MaxOutputBytes), a flood; the rest is not read"}, notes)
			parsed := 0
			for _, kind := range []phases.StreamKind{phases.StreamText, phases.StreamStderr} {
				for _, l := range rec.lines(kind) {
					parsed += len(l) + 1
				}
			}
			assert.LessOrEqual(t, parsed, limit, "nothing past the bound is parsed")
			assert.LessOrEqual(t, len(res.Output), 4<<10+100)
		})
	}
}
