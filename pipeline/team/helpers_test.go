package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// scriptedAgent is a shell script playing every stage: it reports through
// the result file, and in the build stage writes <story>.txt and commits.
// Behaviour is steered per story by files in the control directory:
//
//	<id>.fail-stage-N   exit 3 at stage N with "boom N" on stderr
//	<id>.bad            the build writes BAD (the gate fails) until the
//	                    feedback mentions BAD
//	<id>.nogo           the validation says no-go
//	<id>.silent         the build commits but reports nothing (evidence only)
//	<id>.line           report with the canonical line (with the assignment's
//	                    id and report key) instead of the file
//	<id>.nochange       the build reports complete without changing anything
//	<id>.forged         the result file names another assignment
//	<id>.hang           the plan stage writes a line (its FOREMAN_RESULT)
//	                    to <id>.started, a FIFO the test reads (startsOf),
//	                    and hangs
//	<id>.hold           a FIFO: the build waits until the test writes to
//	                    it (release), once
const scriptedAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
stage=$FOREMAN_STAGE
echo "$id stage $stage $FOREMAN_ASSIGNMENT ${FOREMAN_RESULT:-}" >> "$ctl/log"
if [ -e "$ctl/$id.fail-stage-$stage" ]; then echo "boom $stage" >&2; exit 3; fi
if [ -e "$ctl/$id.hang" ] && [ "$FOREMAN_ROLE" = planner ]; then
  echo "$FOREMAN_RESULT" >> "$ctl/$id.started"
  exec sleep 600
fi
report() { # outcome [extra json]
  if [ -e "$ctl/$id.line" ]; then return 0; fi
  a=$FOREMAN_ASSIGNMENT
  [ -e "$ctl/$id.forged" ] && a="$id-a999"
  printf '{"assignment":"%s","outcome":"%s"%s}\n' "$a" "$1" "${2:-}" > "$FOREMAN_RESULT"
}
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":2,"score":4'
   [ -e "$ctl/$id.line" ] && echo "Stage 0 COMPLETE for $id. 2 tasks created. Plan score: 4/4. [assignment $FOREMAN_ASSIGNMENT key $FOREMAN_REPORT_KEY]"
   ;;
validator) if [ -e "$ctl/$id.nogo" ]; then report no-go ',"score":2,"summary":"the story is unclear"'; else report go ',"score":9'; fi
   [ -e "$ctl/$id.line" ] && echo "Stage 1 COMPLETE for $id. Verdict: GO. Readiness: 9. [assignment $FOREMAN_ASSIGNMENT key $FOREMAN_REPORT_KEY]"
   ;;
*) if [ -p "$ctl/$id.hold" ]; then cat "$ctl/$id.hold" > /dev/null; rm -f "$ctl/$id.hold"; fi
   if [ -e "$ctl/$id.nochange" ]; then report complete ',"summary":"all done (not really)"'; exit 0; fi
   content=ok
   case "$*" in *REVIEW-FIX*) content=reviewed;; esac
   if [ -e "$ctl/$id.bad" ]; then
     case "$*" in *BAD*) content=fixed;; *) content=BAD;; esac
   fi
   echo "$content" > "$id.txt"
   git add -A && { git diff --cached --quiet || git commit -qm "$id: $content"; }
   [ -e "$ctl/$id.silent" ] || report complete ',"summary":"wrote the file"'
   ;;
esac
exit 0
`

// gatePlan fails when any story file says BAD.
func gatePlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "no-bad", Argv: []string{"sh", "-c", `if grep -l BAD *.txt 2>/dev/null; then echo "BAD content in the files above" >&2; exit 1; fi`}},
	}}}}
}

// requireSandbox skips a test that needs the OS sandbox where bwrap cannot
// make one; in CI (CI=true), which installs it, it fails instead.
func requireSandbox(t *testing.T) {
	t.Helper()
	if !agentcmd.New(agentcmd.Config{Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}).Sandboxed() {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs the OS sandbox")
		}
		t.Skip("no OS sandbox here")
	}
}

// ctlSandbox lets a sandboxed scripted agent write the test's control
// directory, its channel to the test (logs, markers).
func ctlSandbox(ctl string) agentcmd.Sandbox {
	return agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: ctl, Writable: true}}}
}

type fixture struct {
	repo, ctl string
	cfg       team.Config
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	ctx := context.Background()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), ctl: filepath.Join(dir, "ctl")}
	require.NoError(t, demo.NewGoModuleRepo(ctx, f.repo))
	require.NoError(t, os.MkdirAll(f.ctl, 0o755))
	require.NoError(t, os.MkdirAll(filepath.Join(dir, "bin"), 0o755))
	script, err := demo.WriteScript(filepath.Join(dir, "bin"), "agent.sh", strings.ReplaceAll(scriptedAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg = team.Config{
		Repo:  f.repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)}),
		Gates: gatePlan(),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig(), Author: merge.Identity{Name: demo.Identity().Name, Email: demo.Identity().Email}},
	}
	return f
}

func (f *fixture) touch(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, name), nil, 0o644))
}

func (f *fixture) newTeam(t *testing.T) *team.Team {
	t.Helper()
	tm, err := team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	return tm
}

// run runs the team with a generous bound (a hang fails the test rather
// than the suite).
func run(t *testing.T, tm *team.Team) team.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	return res
}

// runInBackground starts tm.Run on another goroutine; the returned
// function waits for it and checks its error on the test's goroutine (a
// require on another goroutine would leave the test hanging).
func runInBackground(t *testing.T, tm *team.Team) (wait func() team.Result) {
	t.Helper()
	type outcome struct {
		res team.Result
		err error
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	done := make(chan outcome, 1)
	go func() {
		res, err := tm.Run(ctx)
		done <- outcome{res, err}
	}()
	t.Cleanup(cancel)
	return func() team.Result {
		t.Helper()
		o := <-done
		require.NoError(t, o.err)
		return o.res
	}
}

// trailers lists the Foreman-Item trailers of main's commits, newest first.
func trailers(t *testing.T, repo string) []string {
	t.Helper()
	g := gitexec.Runner{Env: demo.IsolatedGitConfig()}
	out, err := g.Run(context.Background(), repo, "log", "--format=%(trailers:key=Foreman-Item,valueonly,separator=%x2C)", "main")
	require.NoError(t, err)
	var ids []string
	for _, l := range strings.Split(strings.TrimSpace(out), "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ids = append(ids, l)
		}
	}
	return ids
}

func stateOf(res team.Result, id foreman.ItemID) team.StoryStatus {
	for _, s := range res.Stories {
		if s.ID == id {
			return s
		}
	}
	return team.StoryStatus{}
}

func (f *fixture) remove(t *testing.T, name string) {
	t.Helper()
	require.NoError(t, os.Remove(filepath.Join(f.ctl, name)))
}

// reviewerAgent approves a story whose file says "reviewed" and otherwise
// rejects it asking for REVIEW-FIX; with <id>.picky it always rejects.
const reviewerAgent = `#!/bin/sh
ctl=%CTL%
id=$FOREMAN_ITEM
echo "$id review $FOREMAN_ROLE" >> "$ctl/log"
if [ ! -e "$ctl/$id.picky" ] && [ "$(cat "$id.txt")" = reviewed ]; then
  printf '{"assignment":"%s","outcome":"approve"}' "$FOREMAN_ASSIGNMENT" > "$FOREMAN_RESULT"
else
  printf '{"assignment":"%s","outcome":"reject","summary":"please write REVIEW-FIX"}' "$FOREMAN_ASSIGNMENT" > "$FOREMAN_RESULT"
fi
`

func (f *fixture) withReviewer(t *testing.T) {
	t.Helper()
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "reviewer.sh", strings.ReplaceAll(reviewerAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Reviewer = agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
}
