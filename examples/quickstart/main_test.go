package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// markChildren gives every process the test starts (and theirs) a unique
// environment variable, so that leftovers can be found afterwards, even
// those that were reparented.
func markChildren(t *testing.T) string {
	t.Helper()
	token := fmt.Sprintf("%s-%d-%d", t.Name(), os.Getpid(), time.Now().UnixNano())
	t.Setenv("FOREMAN_QUICKSTART_TEST", token)
	return token
}

// leftovers lists the processes other than this one whose environment
// carries token.
func leftovers(t *testing.T, token string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc: cannot look for leftover processes")
	}
	needle := []byte("FOREMAN_QUICKSTART_TEST=" + token + "\x00")
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil || !bytes.Contains(env, needle) {
			continue
		}
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		found = append(found, fmt.Sprintf("%d %s", pid, bytes.ReplaceAll(cmdline, []byte{0}, []byte{' '})))
	}
	return found
}

func gitLines(t *testing.T, dir string, args ...string) []string {
	t.Helper()
	out, err := git(context.Background(), dir, args...)
	require.NoError(t, err)
	return strings.Fields(out)
}

func byID(res team.Result) map[foreman.ItemID]team.StoryStatus {
	m := map[foreman.ItemID]team.StoryStatus{}
	for _, s := range res.Stories {
		m[s.ID] = s
	}
	return m
}

// What CI checks: the quickstart end to end, as `go run ./examples/quickstart`
// runs it. Five stories merge exactly once, one squash commit each with its
// trailer; US-003's first build fails the gates and its agent fixes it from
// their feedback; US-002 meets a merge conflict, is rebased (conflicting)
// and given back to its agent once, and is then paused with an
// escalation naming the file; no agent process is left, and no worktree
// but the paused story's, which the team keeps for the person.
func TestQuickstartEndToEnd(t *testing.T) {
	skipUnlessLong(t) // 13 s of go vet and go test in real worktrees; CI also runs the binary
	token := markChildren(t)
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 6, parallel: 3, keep: true, dir: t.TempDir(), timeout: 4 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	text := out.String()

	// Exactly one commit on main per merged story, each with its trailer.
	count := map[string]int{}
	for _, id := range gitLines(t, res.Repo, "log", "--format=%(trailers:key=Foreman-Item,valueonly)", "main") {
		count[id]++
	}
	assert.Equal(t, map[string]int{"US-001": 1, "US-003": 1, "US-004": 1, "US-005": 1, "US-006": 1}, count, text)
	assert.Equal(t, []string{"6"}, gitLines(t, res.Repo, "rev-list", "--count", "main"), "the initial commit and five squash commits\n"+text)
	stories := byID(res.Result)
	for _, id := range []foreman.ItemID{"US-001", "US-003", "US-004", "US-005", "US-006"} {
		assert.Equal(t, team.StoryMerged, stories[id].State, "%s\n%s", id, text)
		assert.NotEmpty(t, stories[id].Commit, id)
	}

	// US-002: paused on the conflict in calc.go, with an actionable escalation.
	paused := stories["US-002"]
	assert.Equal(t, team.StoryPaused, paused.State, text)
	if assert.NotNil(t, paused.Pause, text) {
		assert.Equal(t, pipeline.ReasonMergeConflict, paused.Pause.Reason)
		assert.Equal(t, []string{"calc.go"}, paused.Pause.Files)
		assert.Contains(t, paused.Pause.Message, "calc.go")
		assert.NotEmpty(t, paused.Pause.SuggestedAction)
	}
	assert.Contains(t, text, "US-002  PAUSED: MERGE_CONFLICT: Merge conflict in Story US-002: calc.go")
	assert.Contains(t, text, "files: calc.go")
	assert.Contains(t, text, "triage: rebased onto main 2 times, given back to its agent once")
	var triage []team.EventKind
	for _, e := range res.Events {
		switch e.Kind {
		case team.EventConflict, team.EventRebased, team.EventConflictRework:
			if e.Story == "US-002" {
				triage = append(triage, e.Kind)
			}
		}
	}
	assert.Equal(t, []team.EventKind{team.EventConflict, team.EventConflict, team.EventConflictRework, team.EventConflict, team.EventConflict},
		triage, "squash and rebase conflict, one rework, squash and rebase conflict again")

	// US-003: the gates failed its first build, the agent got their output
	// and fixed Mul on its branch; the build stage ran once and completed.
	assert.Contains(t, text, "US-003  gates failed, the agent gets their output: go test -count=1 ./...: --- FAIL: TestMul")
	assert.Equal(t, []string{"US-003: fix after the gates' feedback", "US-003: Mul: the product of two integers"},
		strings.Split(strings.TrimSpace(gitOut(t, res.Repo, "log", "--format=%s", "main..foreman/US-003")), "\n"))
	var builds []pipeline.Outcome
	for _, e := range res.Events {
		if e.Story == "US-003" && e.Kind == team.EventStageFinished && e.Stage == 2 {
			builds = append(builds, e.Outcome)
		}
	}
	assert.Equal(t, []pipeline.Outcome{pipeline.Complete}, builds)

	// The status as it changed, and the summary.
	assert.Contains(t, text, "Waiting for a person (Resolve: retry, resume, skip, abandon)")
	assert.Contains(t, text, "[|| US-002]", "the paused story is parked in the task graph")
	assert.Contains(t, text, "\n5 merged, 1 paused, 0 skipped, 0 abandoned, 0 blocked, 0 pending, in ")

	// Nothing left behind but the paused story's worktree.
	assert.Equal(t, []string{res.Repo, filepath.Join(res.Repo, ".worktrees", "US-002")},
		worktrees(t, res.Repo), "the merged stories' worktrees are removed")
	assert.Empty(t, leftovers(t, token), "processes left running")
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := git(context.Background(), dir, args...)
	require.NoError(t, err)
	return out
}

// worktrees lists the repository's worktrees, paths with symlinks resolved.
func worktrees(t *testing.T, repo string) []string {
	t.Helper()
	var paths []string
	for _, l := range strings.Split(gitOut(t, repo, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			paths = append(paths, p)
		}
	}
	return paths
}

// With -parallel 1 the team keeps to one story in flight: each starts only
// once the one before it has merged.
func TestParallelLimitHoldsReadyStories(t *testing.T) {
	skipUnlessLong(t) // the whole quickstart again; team's tests cover Workers
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 3, parallel: 1, dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	text := out.String()
	assert.Equal(t, 3, res.Result.Merged, text)
	inFlight := map[foreman.ItemID]bool{}
	for _, e := range res.Events {
		switch e.Kind {
		case team.EventStageStarted:
			inFlight[e.Story] = true
			assert.Len(t, inFlight, 1, "at %s, more than one story in flight\n%s", e.Story, text)
		case team.EventStoryMerged, team.EventStoryPaused:
			delete(inFlight, e.Story)
		}
	}
	assert.Contains(t, text, "3 merged, 0 paused, 0 skipped, 0 abandoned, 0 blocked, 0 pending")
}

// Without -keep the run's directory is gone; one story, one at a time.
func TestQuickstartDeletesItsDirectory(t *testing.T) {
	skipUnlessLong(t) // a whole quickstart run for its last step
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 1, parallel: 1, dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	assert.Equal(t, 1, res.Result.Merged, out.String())
	assert.NoDirExists(t, res.Dir)
}

// shellQuote makes s one word for sh, whatever it holds.
func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// -agent runs another command: here a stand-in for an agent CLI that knows
// nothing of the demo and acts on the prompt alone: it reads the result
// file's path and the report to write from the prompt, and in the build
// stage writes a file and commits. Its path has a space and a quote, and
// the command line quotes it as a user would.
func TestAgentFlagRunsACommandOnThePrompt(t *testing.T) {
	skipUnlessLong(t) // a second whole quickstart run
	bin := filepath.Join(t.TempDir(), "my agent's bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	cli := filepath.Join(bin, "fake-agent")
	require.NoError(t, os.WriteFile(cli, []byte(`#!/bin/sh
set -eu
prompt="$1"
result=$(printf '%s\n' "$prompt" | sed -n 's/^Write your report as JSON to the file \(.*\) (also in .*$/\1/p')
id=$(printf '%s\n' "$prompt" | sed -n 's/^You are the .* for story \([^:]*\):.*/\1/p')
assignment=$(printf '%s\n' "$prompt" | sed -n 's/.*"assignment": "\([^"]*\)".*/\1/p' | head -n 1)
case "$prompt" in
*"(plan stage)"*) outcome='"complete", "tasks": 2' ;;
*"(validate stage)"*) outcome='"go"' ;;
*) f=$(echo "$id" | tr 'A-Z-' 'a-z_').go
   printf 'package calc\n\n// Answer%s is 42.\nconst Answer%s = 42\n' "$(echo "$id" | tr -d -)" "$(echo "$id" | tr -d -)" > "$f"
   git add "$f" && git commit -qm "$id: by the fake agent"
   outcome='"complete"' ;;
esac
printf '{"assignment": "%s", "outcome": %s}\n' "$assignment" "$outcome" > "$result"
`), 0o755))
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 2, parallel: 2, agent: shellQuote(cli) + " {prompt}", dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	assert.Equal(t, 2, res.Result.Merged, out.String())
}

// shellArgv's command line is split by sh as a shell would, and the
// placeholders arrive as whole arguments, never pasted into the line.
func TestShellArgv(t *testing.T) {
	prompt := `it's "quoted"; $(touch /tmp/pwned) and spaced`
	expand := strings.NewReplacer("{prompt}", prompt, "{task}", "T", "{feedback}", "F", "{workspace}", "/w s", "{session}", "", "{iteration}", "2")
	tests := []struct{ cmdline, want string }{
		{`printf '<%s>' 'a b' {prompt}`, "<a b><" + prompt + ">"},
		{`printf '<%s>' --in={workspace}`, "<--in=/w s><" + prompt + ">"}, // no {prompt}: it comes last
		{`printf "<%s>" {session} x {iteration}`, "<><x><2><" + prompt + ">"},
		{`printf "<%s>" {task} {feedback}`, "<T><F>"},
	}
	for _, tt := range tests {
		argv, err := shellArgv(tt.cmdline)
		require.NoError(t, err)
		argv = append(argv, "--resume", "s-1") // what agentcmd adds to resume a session
		for i := range argv {
			argv[i] = expand.Replace(argv[i])
		}
		got, err := exec.Command(argv[0], argv[1:]...).Output()
		require.NoError(t, err, tt.cmdline)
		assert.Equal(t, tt.want+"<--resume><s-1>", string(got), tt.cmdline)
	}
	_, err := shellArgv(`my-agent 'unterminated {prompt}`)
	assert.ErrorContains(t, err, "nterminated")
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		o    options
		want string
	}{
		{options{stories: 0, parallel: 1}, "-stories 0"},
		{options{stories: 21, parallel: 1}, "-stories 21"},
		{options{stories: 6, parallel: 0}, "-parallel 0"},
		{options{stories: 6, parallel: 1, agent: "'open"}, "-agent: "},
		{options{stories: 6, parallel: 1, agent: "my-agent -p {prompt}"}, ""},
	}
	for _, tt := range tests {
		_, err := tt.o.validate()
		if tt.want == "" {
			assert.NoError(t, err)
			continue
		}
		assert.ErrorContains(t, err, tt.want)
	}
}

// Any number of stories is a valid plan whose dependencies point at
// earlier stories, and the agent script for it is valid shell.
func TestDemoStories(t *testing.T) {
	for _, n := range []int{1, 6, 9} {
		stories := demoStories(n)
		require.Len(t, stories, n)
		seen := map[foreman.ItemID]bool{}
		for _, s := range stories {
			require.NoError(t, s.ID.Validate())
			for _, b := range s.After {
				assert.True(t, seen[b], "%s comes after a later story %s", s.ID, b)
			}
			seen[s.ID] = true
		}
		script := filepath.Join(t.TempDir(), "agent.sh")
		require.NoError(t, os.WriteFile(script, []byte(agentScript(stories)), 0o755))
		out, err := exec.Command("sh", "-n", script).CombinedOutput()
		assert.NoError(t, err, "%s", out)
	}
}

// skipUnlessLong skips a second whole-program run unless FOREMAN_STRESS is
// set, as CI sets it: a developer's go test ./... stays about a minute.
func skipUnlessLong(t *testing.T) {
	t.Helper()
	if v := os.Getenv("FOREMAN_STRESS"); v == "" || v == "0" {
		t.Skip("long end-to-end run: FOREMAN_STRESS=1 runs it (CI does)")
	}
}
