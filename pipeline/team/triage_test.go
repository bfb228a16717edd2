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
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// triageAgent plays every stage for the conflict triage tests. Its build
// sources <id>.build from the control directory (after waiting, with
// <id>.wait, until the story named there has landed on main), where
// set_line N TEXT rewrites line N of shared.txt and commit commits. Given a
// merge conflict to resolve (its prompt has the section), it keeps the
// prompt in <id>.rework-prompt and rebases onto main, resolving
// shared.txt as main's version with line 2 "two-A+<id>"; with <id>.stubborn
// it commits yet another line 2 on its old base instead, with
// <id>.fix-on-rework it appends "fixed" to shared.txt.
const triageAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
prompt="$1"
echo "$id $FOREMAN_ROLE $FOREMAN_ASSIGNMENT" >> "$ctl/log"
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4'; exit 0 ;;
validator) report go ',"score":9'; exit 0 ;;
esac
set_line() { awk -v n="$1" -v t="$2" 'NR==n{print t; next}{print}' shared.txt > shared.tmp && mv shared.tmp shared.txt; }
commit() { git add -A && git commit -qm "$id: $1"; }
case "$prompt" in
*"## The merge conflict to resolve"*)
  printf '%s\n' "$prompt" > "$ctl/$id.rework-prompt"
  if [ -e "$ctl/$id.fix-on-rework" ]; then echo fixed >> shared.txt; commit fixed; report complete; exit 0; fi
  if [ -e "$ctl/$id.stubborn" ]; then set_line 2 "two-$id-again"; commit "still mine"; report complete; exit 0; fi
  if ! git rebase -q main >/dev/null 2>&1; then
    git show main:shared.txt > shared.txt
    set_line 2 "two-A+$id"
    git add shared.txt
    GIT_EDITOR=true git rebase --continue >/dev/null
  fi
  report complete
  exit 0 ;;
esac
if [ -e "$ctl/$id.wait" ]; then
  other=$(cat "$ctl/$id.wait"); i=0
  # Polled every 0.2 s: each look is three processes.
  until git log main --format=%B | grep -qx "Foreman-Item: $other"; do
    i=$((i + 1)); [ "$i" -lt 300 ] || { echo "$other never landed" >&2; exit 1; }
    sleep 0.2
  done
fi
. "$ctl/$id.build"
report complete
`

const sharedFile = "one\ntwo\nthree\nfour\nfive\nsix\nseven\neight\n"

// triageFixture is a repository with shared.txt on main and a team of two
// workers whose agent is triageAgent; its gate logs, for every run, the
// story and whether main is in the change's history ("on-main"), so a
// gate run on a rebased change shows.
func triageFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.repo, "shared.txt"), []byte(sharedFile), 0o644))
	g := gitexec.Runner{Author: demo.Identity(), Env: demo.IsolatedGitConfig()}
	_, err := g.Run(context.Background(), f.repo, "add", "shared.txt")
	require.NoError(t, err)
	_, err = g.Run(context.Background(), f.repo, "commit", "-qm", "shared.txt")
	require.NoError(t, err)
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "triage-agent.sh", strings.ReplaceAll(triageAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
	f.cfg.Workers = 2
	logLine := `echo "$(basename "$PWD") $(git merge-base --is-ancestor main HEAD && echo on-main || echo behind)" >> ` + demo.ShellQuote(filepath.Join(f.ctl, "gates.log"))
	f.cfg.Gates = phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "log", Argv: []string{"sh", "-c", logLine}},
	}}}}
	return f
}

func (f *fixture) write(t *testing.T, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, name), []byte(content), 0o644))
}

func (f *fixture) read(t *testing.T, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.ctl, name))
	require.NoError(t, err)
	return string(data)
}

// twoStories: A changes line 2 of shared.txt; B starts beside it (two
// workers), waits until A has landed, then runs its own build: its branch
// starts from the main before A, so its squash meets A's change.
func (f *fixture) twoStories(t *testing.T, bBuild string) *team.Team {
	t.Helper()
	f.write(t, "A.build", "set_line 2 two-A\ncommit two-A\n")
	f.write(t, "B.wait", "A")
	f.write(t, "B.build", bBuild)
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "line two for A"}, team.Story{ID: "B", Title: "line two for B"}))
	return tm
}

func mainFile(t *testing.T, repo, name string) string {
	t.Helper()
	out, err := (&gitexec.Runner{Env: demo.IsolatedGitConfig()}).Run(context.Background(), repo, "show", "main:"+name)
	require.NoError(t, err)
	return out
}

func eventsOf(tm *team.Team, story foreman.ItemID, kind team.EventKind) []team.Event {
	var out []team.Event
	for _, e := range tm.Events(0) {
		if e.Story == story && e.Kind == kind {
			out = append(out, e)
		}
	}
	return out
}

// assertClean checks main and every story worktree: nothing uncommitted,
// no rebase or merge in progress.
func assertClean(t *testing.T, repo string) {
	t.Helper()
	g := &gitexec.Runner{Env: demo.IsolatedGitConfig()}
	ctx := context.Background()
	list, err := g.Lines(ctx, repo, "worktree", "list", "--porcelain")
	require.NoError(t, err)
	var dirs []string
	for _, l := range list {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			dirs = append(dirs, p)
		}
	}
	require.NotEmpty(t, dirs)
	for _, dir := range dirs {
		status, err := g.Run(ctx, dir, "status", "--porcelain")
		require.NoError(t, err)
		assert.Empty(t, status, "uncommitted changes in %s", dir)
		for _, name := range []string{"rebase-merge", "rebase-apply", "MERGE_HEAD", "CHERRY_PICK_HEAD"} {
			p, err := g.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", name)
			require.NoError(t, err)
			assert.NoFileExists(t, strings.TrimSpace(p), "%s in progress in %s", name, dir)
			assert.NoDirExists(t, strings.TrimSpace(p), "%s in progress in %s", name, dir)
		}
	}
}

func TestASquashConflictThatRebasesCleanlyIsGatedAgainAndLands(t *testing.T) {
	t.Parallel()
	f := triageFixture(t)
	// B makes A's change too (the same commit's patch, which a rebase
	// drops as already on main), then changes that line further: the
	// squash onto main conflicts, the rebase does not.
	tm := f.twoStories(t, "set_line 2 two-A\ncommit 'the same fix as A'\nset_line 2 two-AB\nset_line 8 eight-B\ncommit two-AB\n")
	res := run(t, tm)
	require.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"A", "B"}, trailers(t, f.repo), "one squash commit each")
	assert.Equal(t, "one\ntwo-AB\nthree\nfour\nfive\nsix\nseven\neight-B\n", mainFile(t, f.repo, "shared.txt"))

	conflicts := eventsOf(tm, "B", team.EventConflict)
	require.Len(t, conflicts, 1, "the squash conflicted once")
	assert.Equal(t, pipeline.Outcome("SQUASH"), conflicts[0].Outcome)
	assert.Equal(t, []string{"shared.txt"}, conflicts[0].Files)
	require.Len(t, eventsOf(tm, "B", team.EventRebased), 1)
	assert.Empty(t, eventsOf(tm, "B", team.EventConflictRework))
	assert.Empty(t, eventsOf(tm, "B", team.EventStoryPaused))
	// The gates ran again on the rebased change, which has main (with A)
	// in its history; every earlier run of B's was behind main.
	assert.Contains(t, f.read(t, "gates.log"), "B on-main\n")
	gatesAfterRebase := false
	for _, e := range tm.Events(eventsOf(tm, "B", team.EventRebased)[0].Seq) {
		if e.Story == "B" && e.Kind == team.EventGates && e.Outcome == "PASS" {
			gatesAfterRebase = true
		}
	}
	assert.True(t, gatesAfterRebase, "an EventGates for B after it was rebased")
	assertClean(t, f.repo)
}

func TestARealConflictGoesBackToTheAgentOnceAndLands(t *testing.T) {
	t.Parallel()
	f := triageFixture(t)
	tm := f.twoStories(t, "set_line 2 two-B\ncommit two-B\n")
	res := run(t, tm)
	require.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"A", "B"}, trailers(t, f.repo))
	assert.Equal(t, "one\ntwo-A+B\nthree\nfour\nfive\nsix\nseven\neight\n", mainFile(t, f.repo, "shared.txt"))

	reworks := eventsOf(tm, "B", team.EventConflictRework)
	require.Len(t, reworks, 1, "one rework")
	assert.Equal(t, []string{"shared.txt"}, reworks[0].Files)
	assert.Equal(t, 2, reworks[0].Stage, "back to the build stage")
	var outcomes []pipeline.Outcome
	for _, e := range eventsOf(tm, "B", team.EventConflict) {
		outcomes = append(outcomes, e.Outcome)
	}
	assert.Equal(t, []pipeline.Outcome{"SQUASH", "REBASE"}, outcomes)
	assert.Empty(t, eventsOf(tm, "B", team.EventStoryPaused), "a rework is not a pause for a person")

	// The builder's prompt had the conflict: the file and both sides.
	prompt := f.read(t, "B.rework-prompt")
	assert.Contains(t, prompt, "conflicts in shared.txt")
	assert.Contains(t, prompt, "<<<<<<< main\ntwo-A\n=======\ntwo-B\n>>>>>>> yours")
	assert.Contains(t, prompt, "git rebase main")
	builds := 0
	for _, e := range eventsOf(tm, "B", team.EventStageStarted) {
		if e.Stage == 2 {
			builds++
		}
	}
	assert.Equal(t, 2, builds, "the build, and one fresh builder for the rework")
	assertClean(t, f.repo)
}

func TestAConflictAfterTheReworkPausesNamingTheFiles(t *testing.T) {
	stress.Long(t) // the pause after a rework; triagedecide_test covers the decision and CI runs it
	t.Parallel()
	f := triageFixture(t)
	f.touch(t, "B.stubborn")
	tm := f.twoStories(t, "set_line 2 two-B\ncommit two-B\n")
	res := run(t, tm)
	assert.Equal(t, 1, res.Merged, res.String())
	require.Equal(t, 1, res.Paused, res.String())
	assert.Equal(t, []string{"A"}, trailers(t, f.repo), "B did not land")

	b := stateOf(res, "B")
	require.NotNil(t, b.Pause)
	assert.Equal(t, pipeline.ReasonMergeConflict, b.Pause.Reason)
	assert.Equal(t, []string{"shared.txt"}, b.Pause.Files)
	assert.Contains(t, b.Pause.Message, "shared.txt")
	assert.Contains(t, b.Pause.SuggestedAction, "Resolve with resume")
	require.NotNil(t, b.Triage)
	assert.Equal(t, 1, b.Triage.Reworks)
	assert.Equal(t, 2, b.Triage.Rebases)
	assert.Len(t, eventsOf(tm, "B", team.EventConflictRework), 1, "never a second rework")
	assert.Len(t, eventsOf(tm, "B", team.EventStoryPaused), 1)

	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	text := st.Text()
	t.Log(text)
	assert.Contains(t, text, "files: shared.txt")
	assert.Contains(t, text, "rebased onto main 2 times, given back to its agent once")
	// Another process reads the same, without the team's repository manager.
	read, err := team.ReadStatus(context.Background(), team.Config{Repo: f.repo})
	require.NoError(t, err)
	assert.Contains(t, read.Text(), "triage: rebased onto main 2 times, given back to its agent once")
	// The worktree stays for the person, clean, its rebase aborted.
	wt, err := tm.Worktree("B")
	require.NoError(t, err)
	assert.DirExists(t, wt)
	assertClean(t, f.repo)

	// Another Run changes nothing: the story waits for a person.
	res = run(t, tm)
	assert.Equal(t, 1, res.Paused)
	assert.Len(t, eventsOf(tm, "B", team.EventConflictRework), 1)
}

// A Run stopped in the middle of conflict triage (its merge effect cut
// short, or the rework granted but not yet started) leaves what it decided
// in the store; the next Run, of a new Team on the same repository,
// finishes it: one rework at most, one squash commit per story, the gates
// run on a rebased change before it merges.
func TestConflictTriageFinishesAfterARunStopsMidway(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		bBuild string
		stopAt team.EventKind
		// reworks and merged B's branch content on main.
		reworks int
		line2   string
	}{
		{"stopped as the squash conflicts", "set_line 2 two-B\ncommit two-B\n", team.EventConflict, 1, "two-A+B"},
		{"stopped with the rework granted", "set_line 2 two-B\ncommit two-B\n", team.EventConflictRework, 1, "two-A+B"},
		{"stopped after a clean rebase, before its gates",
			"set_line 2 two-A\ncommit 'the same fix as A'\nset_line 2 two-AB\ncommit two-AB\n", team.EventRebased, 0, "two-AB"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			f := triageFixture(t)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			f.cfg.OnEvent = func(e team.Event) {
				if e.Story == "B" && e.Kind == c.stopAt {
					cancel()
				}
			}
			first := f.twoStories(t, c.bBuild)
			_, err := first.Run(ctx)
			require.ErrorIs(t, err, context.Canceled)
			require.NotEmpty(t, eventsOf(first, "B", c.stopAt), "stopped where the case says")
			require.NoError(t, first.Close())
			gatesBefore := strings.Count(f.read(t, "gates.log"), "B on-main\n")

			f.cfg.OnEvent = nil
			tm := f.newTeam(t)
			res := run(t, tm)
			require.Equal(t, 2, res.Merged, res.String())
			assert.ElementsMatch(t, []string{"A", "B"}, trailers(t, f.repo), "one squash commit each")
			assert.Len(t, eventsOf(tm, "B", team.EventConflictRework), c.reworks, "never a second rework")
			assert.Equal(t, c.line2, strings.Split(mainFile(t, f.repo, "shared.txt"), "\n")[1])
			if c.stopAt == team.EventRebased && gatesBefore == 0 {
				// (The stop reaches the triage an instant late: now and
				// then the first Run gates the rebased change, and records
				// it, before it stops; 1 in 200 runs here.)
				assert.Positive(t, strings.Count(f.read(t, "gates.log"), "B on-main\n"),
					"the rebased change was gated after the restart, before it merged")
			}
			assertClean(t, f.repo)
		})
	}
}

func TestARebasedChangeThatFailsTheGatesGoesBackToTheAgentOnce(t *testing.T) {
	stress.Long(t) // the rework path TestARealConflictGoesBackToTheAgentOnceAndLands takes, from the gates
	t.Parallel()
	f := triageFixture(t)
	// B's change is fine on its own base; rebased onto main (with A) it
	// fails the gates until shared.txt says "fixed".
	f.cfg.Gates.Levels[0].Checks = append(f.cfg.Gates.Levels[0].Checks, phases.GateCheck{Name: "B on main needs the fix", Argv: []string{"sh", "-c",
		`if [ "$(basename "$PWD")" = B ] && git merge-base --is-ancestor main HEAD && ! grep -q fixed shared.txt; then echo "B rebased without the fix" >&2; exit 1; fi`}})
	f.touch(t, "B.fix-on-rework")
	tm := f.twoStories(t, "set_line 2 two-A\ncommit 'the same fix as A'\nset_line 2 two-AB\ncommit two-AB\n")
	res := run(t, tm)
	require.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"A", "B"}, trailers(t, f.repo))
	assert.Equal(t, "one\ntwo-AB\nthree\nfour\nfive\nsix\nseven\neight\nfixed\n", mainFile(t, f.repo, "shared.txt"))
	require.Len(t, eventsOf(tm, "B", team.EventRebased), 1)
	require.Len(t, eventsOf(tm, "B", team.EventConflictRework), 1)
	assert.Empty(t, eventsOf(tm, "B", team.EventStoryPaused))
	var failed []team.Event
	for _, e := range eventsOf(tm, "B", team.EventGates) {
		if e.Outcome == "FAIL" {
			failed = append(failed, e)
		}
	}
	require.Len(t, failed, 1, "the gates failed once: on the rebased change")
	assert.Contains(t, failed[0].Detail, "B rebased without the fix")
	prompt := f.read(t, "B.rework-prompt")
	assert.Contains(t, prompt, "fails the gates")
	assert.Contains(t, prompt, "B rebased without the fix")
	assertClean(t, f.repo)
}
