package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

// gitEnv keeps the machine's git configuration out (a global hook or
// commit.gpgsign would break the commits) and gives the scripted agent an
// identity; the foreman process and its agents inherit it.
func gitEnv() []string {
	return []string{"GIT_CONFIG_GLOBAL=/dev/null", "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Agent", "GIT_AUTHOR_EMAIL=agent@example.com",
		"GIT_COMMITTER_NAME=Agent", "GIT_COMMITTER_EMAIL=agent@example.com"}
}

// scriptedAgent plays every stage of the story flow as a real agent CLI
// would: it reads FOREMAN_ITEM, FOREMAN_STAGE and FOREMAN_ASSIGNMENT, and
// writes its report as JSON to FOREMAN_RESULT; the build stage (2) writes
// <story>.txt and commits it. Each execution is logged to $ctl/log as
// "story stage assignment pid". Control files in $ctl steer it:
//
//	<id>.fail      the build exits 3 with "cannot build <id>" on stderr
//	<id>.started   a FIFO: the build writes to it once it has committed
//	               (blocking until the test reads), then reads
//	<id>.release   a FIFO, blocking until the test writes or stops the run
const scriptedAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
stage=$FOREMAN_STAGE
echo "$id $stage $FOREMAN_ASSIGNMENT $$" >> "$ctl/log"
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$stage" in
0) report complete ',"tasks":1,"score":4,"summary":"one task"' ;;
1) report go ',"score":9' ;;
2) if [ -e "$ctl/$id.fail" ]; then echo "cannot build $id" >&2; exit 3; fi
   if [ -e "$ctl/$id.evil" ]; then echo evil > "$(git rev-parse --path-format=absolute --git-common-dir)/../EVIL" || true; fi
   echo "$id was built" > "$id.txt"
   git add "$id.txt"
   # A build resumed after an interrupt finds its work already committed.
   git diff --cached --quiet || git commit -qm "$id: build"
   if [ -p "$ctl/$id.started" ]; then
     echo started > "$ctl/$id.started"
     read -r _ < "$ctl/$id.release"
   fi
   report complete ',"summary":"wrote the file"' ;;
*) echo "unexpected stage $stage" >&2; exit 4 ;;
esac
`

const threeStories = `workers: 2
stories:
  - id: US-001
    title: First
    body: |
      Write US-001.txt.
      Commit it.
  - id: US-002
    title: Second, after the first
    body: Write US-002.txt.
    after: [US-001]
  - id: US-003
    title: Third, on its own
`

type fixture struct {
	repo, ctl, plan, agent string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), ctl: filepath.Join(dir, "ctl"), plan: filepath.Join(dir, "stories.yaml")}
	require.NoError(t, os.MkdirAll(f.repo, 0o755))
	require.NoError(t, os.MkdirAll(f.ctl, 0o755))
	f.git(t, "init", "-q", "-b", "main")
	f.noAutoMaintenance(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.repo, "README"), []byte("a throwaway repository\n"), 0o644))
	f.git(t, "add", "README")
	f.git(t, "commit", "-qm", "initial")
	f.agent = filepath.Join(dir, "agent.sh")
	script := strings.ReplaceAll(scriptedAgent, "%CTL%", shellQuote(f.ctl))
	require.NoError(t, os.WriteFile(f.agent, []byte(script), 0o755))
	require.NoError(t, os.WriteFile(f.plan, []byte(threeStories), 0o644))
	return f
}

// noAutoMaintenance turns off, in the repository's own config, the git
// maintenance run --auto that git commit and merge would start after each
// call (a process each; the library runs it itself every few merges).
func (f *fixture) noAutoMaintenance(t *testing.T) {
	t.Helper()
	config, err := os.OpenFile(filepath.Join(f.repo, ".git", "config"), os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = config.WriteString("[maintenance]\n\tauto = false\n")
	require.NoError(t, err)
	require.NoError(t, config.Close())
}

func (f *fixture) git(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = f.repo
	cmd.Env = append(os.Environ(), gitEnv()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return string(out)
}

// runArgs are the flags of a run of the fixture's plan.
func (f *fixture) runArgs() []string {
	return []string{"-repo", f.repo, "-plan", f.plan, "-agent", shellQuote(f.agent) + " {prompt}", "-bind", f.ctl,
		"-gate", `sh -c '! grep -qs BAD *.txt'`}
}

// command is the foreman binary with args, bounded so that a hang fails the
// test rather than the suite.
func (f *fixture) command(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binary, args...)
	cmd.Env = append(os.Environ(), gitEnv()...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	return cmd, &stdout, &stderr
}

// foreman runs the binary to the end and returns its exit status and output.
func (f *fixture) foreman(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	cmd, stdout, stderr := f.command(t, args...)
	err := cmd.Run()
	return exitCode(t, err), stdout.String(), stderr.String()
}

func exitCode(t *testing.T, err error) int {
	t.Helper()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	require.NoError(t, err)
	return 0
}

// merged lists the Foreman-Item trailers of main's commits, oldest first.
func (f *fixture) merged(t *testing.T) []string {
	t.Helper()
	out := f.git(t, "log", "--reverse", "--format=%(trailers:key=Foreman-Item,valueonly,separator=%x2C)", "main")
	var ids []string
	for _, l := range strings.Split(out, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			ids = append(ids, l)
		}
	}
	return ids
}

// executions counts the agent's executions per "story stage".
func (f *fixture) executions(t *testing.T) map[string]int {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	n := map[string]int{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		w := strings.Fields(l)
		require.Len(t, w, 4, l)
		n[w[0]+" "+w[1]]++
	}
	return n
}

func TestRunMergesThePlanOneSquashCommitPerStory(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	code, stdout, stderr := f.foreman(t, f.runArgs()...)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)

	got := f.merged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got, "one squash commit per story")
	assert.Less(t, indexOf(got, "US-001"), indexOf(got, "US-002"), "US-002 lands after US-001")
	subjects := f.git(t, "log", "--format=%s", "main")
	assert.Contains(t, subjects, "Second, after the first", "the title is the commit's subject")
	for _, id := range got {
		assert.FileExists(t, filepath.Join(f.repo, id+".txt"))
	}
	assert.Contains(t, stdout, "US-002     merged as ")
	assert.Contains(t, stdout, "3 merged, 0 paused")
	assert.NotContains(t, stdout, "from earlier runs", "a fresh repository's first run has no earlier runs (its own story_added events are not theirs)")
	for story, n := range f.executions(t) {
		assert.Equal(t, 1, n, "%s ran once", story)
	}

	code, stdout, _ = f.foreman(t, "-repo", f.repo, "-status")
	assert.Equal(t, exitMerged, code)
	for _, id := range []string{"US-001", "US-002", "US-003"} {
		assert.Regexp(t, id+`\s+merged`, stdout)
	}
	// How the run's agents were contained (-sandbox's default, as the
	// binary's environment has it), read from another process.
	assert.Contains(t, stdout, "\nAgents' containment: "+agentcmd.New(agentcmd.Config{}).Containment()+"\n")

	// Running the finished plan again merges nothing and ends at once.
	code, stdout, stderr = f.foreman(t, f.runArgs()...)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Regexp(t, `\n?[1-9][0-9]* events from earlier runs`, stdout)
	assert.Len(t, f.merged(t), 3)
	for story, n := range f.executions(t) {
		assert.Equal(t, 1, n, "%s not run again", story)
	}
}

// holdInBuild starts a run of the fixture's plan and returns once US-002's
// build has committed and holds (US-001 has merged: US-002 comes after
// it), with the agent's pid. The agent holds until the run stops or the
// test writes to its release FIFO; cleanup kills its process group if it is
// still there.
func (f *fixture) holdInBuild(t *testing.T, extra ...string) (cmd *exec.Cmd, stdout, stderr *bytes.Buffer, agentPid int) {
	t.Helper()
	started, release := filepath.Join(f.ctl, "US-002.started"), filepath.Join(f.ctl, "US-002.release")
	require.NoError(t, syscall.Mkfifo(started, 0o644))
	require.NoError(t, syscall.Mkfifo(release, 0o644))
	// Unsandboxed: the pid the agent logs must be the host's, to check it
	// and to clean it up (a sandbox's pids are its own).
	cmd, stdout, stderr = f.command(t, append(append(f.runArgs(), "-sandbox", "off"), extra...)...)
	require.NoError(t, cmd.Start())
	data, err := os.ReadFile(started) // blocks until the agent writes
	require.NoError(t, err)
	require.Equal(t, "started\n", string(data))
	for _, l := range strings.Split(readFile(t, filepath.Join(f.ctl, "log")), "\n") {
		if strings.HasPrefix(l, "US-002 2 ") {
			_, err := fmt.Sscanf(strings.Fields(l)[3], "%d", &agentPid)
			require.NoError(t, err)
		}
	}
	require.NotZero(t, agentPid)
	t.Cleanup(func() {
		if alive(agentPid) {
			_ = syscall.Kill(-agentPid, syscall.SIGKILL) // agentcmd runs it in a group of its own
		}
	})
	return cmd, stdout, stderr, agentPid
}

// finishAfterStop runs the plan again without the hold: every story merges
// exactly once, and of the stages that had finished none runs again.
func (f *fixture) finishAfterStop(t *testing.T) {
	t.Helper()
	// -status after the stop says no process runs the team, and shows no
	// worker or growing elapsed time for the story it stopped in.
	code, status, _ := f.foreman(t, "-repo", f.repo, "-status")
	assert.Equal(t, exitNeedsPerson, code)
	assert.Regexp(t, `No foreman process is running the team: the last run stopped while (US-00\d, )*US-002(, US-00\d)* (was|were) in flight`, status)
	assert.Regexp(t, `US-002\s+running\s+2 builder\s`, status)
	assert.Contains(t, status, "\nAgents' containment: none: sandbox turned off (Config.Sandbox.Mode)\n", "the stopped run's, -sandbox off")
	assert.NotContains(t, status, "story-US-002-s2", "no worker works on it")
	assert.NotRegexp(t, `US-002\s+running\s+2 builder\s+(\S+\s+)?[0-9.]+(ms|s|m)\s`, status, "no elapsed time")
	require.NoError(t, os.Remove(filepath.Join(f.ctl, "US-002.started")))
	require.NoError(t, os.Remove(filepath.Join(f.ctl, "US-002.release")))
	code, out, errOut := f.foreman(t, f.runArgs()...)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", out, errOut)
	got := f.merged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got, "each story merged exactly once")
	assert.Less(t, indexOf(got, "US-001"), indexOf(got, "US-002"))
	runs := f.executions(t)
	assert.Equal(t, 2, runs["US-002 2"], "the interrupted build ran again")
	for _, k := range []string{"US-001 0", "US-001 1", "US-001 2", "US-002 0", "US-002 1"} {
		assert.Equal(t, 1, runs[k], "%s finished before the stop and is not redone", k)
	}
	code, status, _ = f.foreman(t, "-repo", f.repo, "-status")
	assert.Equal(t, exitMerged, code)
	assert.NotContains(t, status, "is running the team")
}

func TestAnInterruptedRunGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	skipUnlessLong(t) // a second held run; TestAPausedStoryWaitsForAPersonAndIsResolved runs the binary again after a stop
	f := newFixture(t)
	cmd, stdout, stderr, agentPid := f.holdInBuild(t)

	// A person watching from another terminal while the team runs.
	code, status, errOut := f.foreman(t, "-repo", f.repo, "-status")
	assert.Equal(t, exitNeedsPerson, code, errOut)
	assert.Contains(t, status, fmt.Sprintf("A foreman process (pid %d) is running the team.", cmd.Process.Pid))
	assert.Regexp(t, `US-001\s+merged`, status)
	assert.Regexp(t, `US-002\s+running\s+2 builder`, status)
	code, _, errOut = f.foreman(t, "-repo", f.repo, "-plan", f.plan, "-agent", "true", "-gate", "true")
	assert.Equal(t, exitFault, code, "a second run on the same repository is refused")
	assert.Contains(t, errOut, "another process is running this team")
	code, _, errOut = f.foreman(t, "-repo", f.repo, "-resolve", "US-002=retry")
	assert.Equal(t, exitFault, code, "decisions wait until the run stops")
	assert.Contains(t, errOut, "stop the run")

	require.NoError(t, cmd.Process.Signal(os.Interrupt))
	err := cmd.Wait()
	require.Equal(t, exitInterrupted, exitCode(t, err), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stderr.String(), "run the same command again to go on")
	assert.NotContains(t, f.merged(t), "US-002")
	assert.False(t, alive(agentPid), "the interrupted build's agent was stopped with the run")

	f.finishAfterStop(t)
}

// A run killed outright (kill -9, a crash) leaves its agent running; the
// next run stops that agent (agentcmd's lease reaper) before it builds the
// story again, and finishes the plan.
func TestAKilledRunGoesOnWhereItStopped(t *testing.T) {
	t.Parallel()
	skipUnlessLong(t) // the team's and agentcmd's own tests kill hosts and reap orphans
	f := newFixture(t)
	cmd, _, _, agentPid := f.holdInBuild(t)
	require.NoError(t, cmd.Process.Kill())
	_ = cmd.Wait()
	require.True(t, alive(agentPid), "the killed run's agent outlives it (it holds on its FIFO)")

	f.finishAfterStop(t)
	assert.False(t, alive(agentPid), "the next run stopped the orphaned agent")
}

func TestAPausedStoryWaitsForAPersonAndIsResolved(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "US-001.fail"), nil, 0o644))
	code, stdout, stderr := f.foreman(t, f.runArgs()...)
	require.Equal(t, exitNeedsPerson, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Contains(t, stdout, "US-001     PAUSED at stage 2 (builder)")
	assert.Contains(t, stdout, "cannot build US-001", "the pause carries the agent's stderr")
	assert.Contains(t, stderr, "-resolve ID=retry|resume|skip|abandon")
	assert.Equal(t, []string{"US-003"}, f.merged(t), "the independent story merged; US-002 waits behind US-001")

	code, status, _ := f.foreman(t, "-repo", f.repo, "-status", "-json")
	assert.Equal(t, exitNeedsPerson, code)
	assert.Contains(t, status, `"state": "paused"`)
	assert.Contains(t, status, `"state": "blocked"`)

	for _, bad := range [][]string{
		{"-resolve", "US-001=reboot"}, {"-resolve", "US-404=retry"}, {"-resolve", "US-003=retry"}, {"-resolve", "US-001"},
	} {
		code, _, errOut := f.foreman(t, append([]string{"-repo", f.repo}, bad...)...)
		assert.Equal(t, exitUsage, code, "%v: %s", bad, errOut)
	}
	require.NoError(t, os.Remove(filepath.Join(f.ctl, "US-001.fail")))
	code, out, errOut := f.foreman(t, "-repo", f.repo, "-resolve", "US-001=retry", "-note", "the build tool is fixed")
	require.Equal(t, exitMerged, code, errOut)
	assert.Contains(t, out, "US-001: retry recorded")

	code, stdout, stderr = f.foreman(t, f.runArgs()...)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t))
}

func TestBadInputIsRefusedWithItsCause(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	badPlan := filepath.Join(dir, "bad.yaml")
	require.NoError(t, os.WriteFile(badPlan, []byte("stories:\n  - id: A\n    titel: typo\n"), 0o644))
	cases := map[string]struct {
		args []string
		want string
	}{
		"no plan":        {[]string{"-repo", dir}, "-plan is required"},
		"bad plan":       {[]string{"-repo", dir, "-plan", badPlan, "-agent", "x"}, `line 3: unknown field "titel"`},
		"missing plan":   {[]string{"-repo", dir, "-plan", filepath.Join(dir, "nope.yaml"), "-agent", "x"}, "no such file"},
		"no agent":       {[]string{"-repo", dir, "-plan", writePlan(t, dir, threeStories), "-gate", "true"}, "-agent is required"},
		"no gates":       {[]string{"-repo", dir, "-plan", writePlan(t, dir, threeStories), "-agent", "true"}, "no gates"},
		"bad agent":      {[]string{"-repo", dir, "-plan", writePlan(t, dir, threeStories), "-agent", "'unclosed", "-gate", "true"}, "unterminated single quote"},
		"bad format":     {[]string{"-format", "gpt"}, "gpt"},
		"note alone":     {[]string{"-note", "x"}, "-note goes with -resolve"},
		"stray argument": {[]string{"-status", "now"}, `unexpected argument "now"`},
		"no team yet":    {[]string{"-repo", dir, "-status"}, "no team in"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(context.Background(), c.args, &stdout, &stderr)
			assert.Equal(t, exitUsage, code, stderr.String())
			assert.Contains(t, stderr.String(), c.want)
		})
	}
}

func TestAnAgentThatCannotStartIsASystemFault(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	var stdout, stderr bytes.Buffer
	code := run(context.Background(), []string{"-repo", f.repo, "-plan", f.plan, "-agent", "no-such-agent-xyz {prompt}", "-gate", "true"}, &stdout, &stderr)
	assert.Equal(t, exitFault, code)
	assert.Contains(t, stderr.String(), "no-such-agent-xyz")
}

func TestHelpShowsACompleteStoriesFile(t *testing.T) {
	t.Parallel()
	var stdout, stderr bytes.Buffer
	assert.Equal(t, exitMerged, run(context.Background(), []string{"-h"}, &stdout, &stderr))
	help := stderr.String()
	for _, want := range []string{"-plan", "-agent", "-format", "-workers", "-gate", "-status", "-resolve", "stories:", "after: [US-001]", "gates:"} {
		assert.Contains(t, help, want)
	}
	// Every format -format accepts is named in its help.
	assert.Contains(t, help, "text, claude, codex or gemini")
	for _, name := range []string{"text", "claude", "codex", "gemini"} {
		_, err := agentcmd.ParseFormat(name)
		assert.NoError(t, err, name)
	}
}

func writePlan(t *testing.T, dir, content string) string {
	t.Helper()
	path := filepath.Join(dir, "stories.yaml")
	require.NoError(t, os.WriteFile(path, []byte(content), 0o644))
	return path
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	return string(data)
}

// alive reports whether pid is a live process (not gone, not a zombie).
func alive(pid int) bool {
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	fields := strings.Fields(string(data[bytes.LastIndexByte(data, ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

// With -notify, the run's end is POSTed to the webhook, signed with the
// secret from the environment; without the secret, -notify is refused.
func TestTheRunNotifiesAWebhook(t *testing.T) {
	f := newFixture(t)
	got := make(chan teamnotify.Notification, 10)
	const secret = "a-secret-for-this-test-only"
	receiver := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		if err := teamnotify.VerifySignature([]byte(secret), r.Header.Get(teamnotify.SignatureHeader), body, time.Now(), 0); err != nil {
			http.Error(w, err.Error(), http.StatusUnauthorized)
			return
		}
		var n teamnotify.Notification
		_ = json.Unmarshal(body, &n)
		got <- n
	}))
	defer receiver.Close()

	var stdout, stderr bytes.Buffer
	args := append(f.runArgs(), "-http", "", "-notify", receiver.URL)
	assert.Equal(t, exitUsage, run(context.Background(), args, &stdout, &stderr))
	assert.Contains(t, stderr.String(), "FOREMAN_NOTIFY_SECRET")

	t.Setenv("FOREMAN_NOTIFY_SECRET", secret)
	for _, kv := range gitEnv() {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	stdout.Reset()
	stderr.Reset()
	require.Equal(t, exitMerged, run(context.Background(), args, &stdout, &stderr), "stderr:\n%s", &stderr)
	require.Len(t, got, 1, "one notification: the run's end")
	n := <-got
	assert.Equal(t, teamnotify.KindRunFinished, n.Kind)
	assert.Contains(t, n.Detail, "3 merged")
}
