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

// objectsAgent plays every stage; every build commits and runs git gc
// (git's own writes into the agent's object directory: a pack, a
// commit-graph, info/packs); ALT's build also points its object
// directory's alternates elsewhere.
const objectsAgent = `#!/bin/sh
set -eu
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
reviewer) report approve ;;
*) echo ok > "$FOREMAN_ITEM.txt" && git add -A && git commit -qm "$FOREMAN_ITEM: ok"
   git gc -q && git gc -q --auto
   if [ "$FOREMAN_ITEM" = ALT ]; then
     echo /var/tmp > "$(git rev-parse --git-common-dir)/objects/info/alternates"
   fi
   report complete ',"summary":"wrote the file"' ;;
esac
`

// Issue 22's "each attempt shows in Status": an agent that points its own
// object directory's alternates elsewhere is counted as a refusal of its
// story (contained: its copy is thrown away), while what git gc writes
// there for either story is not; both stories land.
func TestAnAgentsWriteToItsAlternatesIsCountedGitGCIsNot(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	ctx := context.Background()
	repo := filepath.Join(hostileBase(t), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	script, err := demo.WriteScript(t.TempDir(), "objects.sh", objectsAgent)
	require.NoError(t, err)
	tm, err := team.New(ctx, team.Config{
		LandRefused: true,
		Repo:        repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(),
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}),
		Gates: gatePlan(),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "GC", Title: "commits and collects"}, team.Story{ID: "ALT", Title: "borrows from elsewhere"}))

	res := run(t, tm)

	assert.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"GC", "ALT"}, trailers(t, repo))
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(1), st.Refused, st.Text())
	alt := stateOf(team.Result{Stories: st.Stories}, "ALT")
	require.Len(t, alt.RefusedKinds, 1)
	assert.Equal(t, `the OS sandbox: the agent rewrote its object directory's alternates (now "/var/tmp"), which git never does: its own copy's, nothing real changed`,
		alt.RefusedKinds[0].Detail)
	assert.Zero(t, stateOf(team.Result{Stories: st.Stories}, "GC").Refused, "git gc's own writes are not counted")
}
