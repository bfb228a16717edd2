package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// idempotentAgent does its work once, as a real agent does when it finds
// it already done: the build writes and commits <id>.txt only when the
// file is not there yet, and otherwise changes nothing.
const idempotentAgent = `#!/bin/sh
set -eu
id=$FOREMAN_ITEM
echo "$id $FOREMAN_ROLE" >> %CTL%/log
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
*) [ -e "$id.txt" ] || { echo ok > "$id.txt"; git add -A; git commit -qm "$id"; }
   report complete ;;
esac
`

// A person's Retry of a build that paused with its work on the story's
// branch (here: gates that failed for a reason outside the story, then
// fixed) counts that work: the retry is not three iterations of "no
// changes" and another pause.
func TestARetriedBuildCountsTheWorkAlreadyOnItsBranch(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "idempotent.sh", strings.ReplaceAll(idempotentAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
	outage := filepath.Join(f.ctl, "outage")
	f.cfg.Gates = phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "service", Argv: []string{"sh", "-c", "if [ -e " + demo.ShellQuote(outage) + " ]; then echo 'the test service is down' >&2; exit 1; fi"}},
	}}}}
	f.touch(t, "outage")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "R", Title: "retried"}))
	first := run(t, tm)
	r := stateOf(first, "R")
	require.Equal(t, team.StoryPaused, r.State, first.String())

	require.NoError(t, os.Remove(outage))
	require.NoError(t, tm.Resolve(ctx, "R", team.Retry, "the test service is back"))
	second := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(second, "R").State, "%s: %+v", second.String(), stateOf(second, "R").Pause)
	assert.Equal(t, []string{"R"}, trailers(t, f.repo))
}

func TestWorktreeSaysWhenAStoryHasNone(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t)
	f.touch(t, "P.fail-stage-2")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "M", Title: "merges"}, team.Story{ID: "P", Title: "pauses"}, team.Story{ID: "W", Title: "waits", After: []foreman.ItemID{"P"}}))
	_, err := tm.Worktree("M")
	assert.ErrorIs(t, err, team.ErrNoWorktree, "not started")
	res := run(t, tm)
	require.Equal(t, 1, res.Merged, res.String())

	_, err = tm.Worktree("M")
	assert.ErrorIs(t, err, team.ErrNoWorktree, "merged, its worktree removed")
	_, err = tm.Worktree("P")
	assert.ErrorIs(t, err, team.ErrNoWorktree, "paused on a stage's failure: its branch stays, its worktree goes")
	_, err = tm.Worktree("W")
	assert.ErrorIs(t, err, team.ErrNoWorktree, "blocked, never started")
}
