package team_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// floodAgent plays every stage; FLOOD's build prints without end.
const floodAgent = `#!/bin/sh
set -eu
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
reviewer) report approve ;;
*) if [ "$FOREMAN_ITEM" = FLOOD ]; then
     yes "$(printf '%0200d' 0)"
   fi
   echo ok > "$FOREMAN_ITEM.txt" && git add -A && git commit -qm "$FOREMAN_ITEM: ok"
   report complete ',"summary":"wrote the file"' ;;
esac
`

// An agent that floods its output is stopped at its driver's bound: its
// story pauses with the cause, the flood is an EventRefused counted in the
// story's status, the team's status and events stay small, and the other
// story lands.
func TestAnOutputFloodIsStoppedAndCounted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	script, err := demo.WriteScript(t.TempDir(), "flood.sh", floodAgent)
	require.NoError(t, err)
	tm, err := team.New(ctx, team.Config{
		Repo: repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(),
			MaxOutputBytes: 1 << 20, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}}),
		Gates: gatePlan(),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "HONEST", Title: "honest"}, team.Story{ID: "FLOOD", Title: "floods its output"}))

	res := run(t, tm)

	f := stateOf(res, "FLOOD")
	require.Equal(t, team.StoryPaused, f.State, res.String())
	require.NotNil(t, f.Pause)
	assert.Contains(t, f.Pause.Message, "stopped at once: the agent printed more than 1 MiB (Config.MaxOutputBytes): an output flood")
	assert.Less(t, len(f.Pause.Message), 4<<10)
	assert.Equal(t, 1, res.Merged, res.String())
	assert.Equal(t, []string{"HONEST"}, trailers(t, repo))
	var refused []string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventRefused {
			assert.Equal(t, "FLOOD", string(e.Story))
			refused = append(refused, e.Detail)
		}
	}
	assert.Equal(t, []string{"the agent's driver: output: stopped the agent: it printed more than 1 MiB (Config.MaxOutputBytes), a flood; the rest is not read"}, refused)
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Refused)
	js, err := st.JSON()
	require.NoError(t, err)
	kept := len(js)
	for _, e := range tm.Events(0) {
		kept += len(e.Line) + len(e.Detail)
	}
	assert.Less(t, kept, 256<<10, "the flood did not reach the team's status or events")
}
