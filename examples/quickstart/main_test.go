package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/pipeline"
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

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	r := gitexec.Runner{}
	out, err := r.Run(context.Background(), dir, args...)
	require.NoError(t, err)
	return out
}

// What CI checks: the quickstart end to end, as `go run ./examples/quickstart`
// runs it. Five stories merge exactly once, one squash commit each with its
// trailer; US-003 fails its quality gate once and is fixed by its rework
// worker; US-002 meets a merge conflict and is PAUSED with an escalation
// naming the file; no worktree and no process is left behind.
func TestQuickstartEndToEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git, go vet and go test in real worktrees")
	}
	token := markChildren(t)
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 6, parallel: 3, keep: true, dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	text := out.String()

	// Exactly one commit on main per merged story, each with its trailer.
	trailers := strings.Fields(git(t, res.Repo, "log", "--format=%(trailers:key=Foreman-Item,valueonly)", "main"))
	count := map[string]int{}
	for _, id := range trailers {
		count[id]++
	}
	assert.Equal(t, map[string]int{"US-001": 1, "US-003": 1, "US-004": 1, "US-005": 1, "US-006": 1}, count, text)
	assert.Equal(t, "6", strings.TrimSpace(git(t, res.Repo, "rev-list", "--count", "main")), "the initial commit and five squash commits\n"+text)

	byID := map[foreman.ItemID]storyOutcome{}
	for _, so := range res.Stories {
		byID[so.Story.ID] = so
	}
	for _, id := range []foreman.ItemID{"US-001", "US-003", "US-004", "US-005", "US-006"} {
		assert.Equal(t, outcomeMerged, byID[id].Status, "%s\n%s", id, text)
		assert.NotEmpty(t, byID[id].Commit, id)
	}

	// US-002: paused on the conflict in calc.go, with an actionable escalation.
	paused := byID["US-002"]
	assert.Equal(t, outcomePaused, paused.Status, text)
	if assert.NotNil(t, paused.Pause, text) {
		assert.Equal(t, pipeline.ReasonMergeConflict, paused.Pause.Reason)
		assert.Equal(t, []string{"calc.go"}, paused.Pause.Files)
		assert.Contains(t, paused.Pause.Message, "calc.go")
		assert.NotEmpty(t, paused.Pause.SuggestedAction)
	}
	assert.Contains(t, text, "PAUSED (MERGE_CONFLICT): Merge conflict in Story US-002: calc.go")
	assert.Contains(t, text, "files: calc.go")

	// US-003: FAIL, rework by story-US-003-s2-fix1 with the gate's feedback, PASS.
	var gate []string
	var workers []string
	for _, a := range byID["US-003"].Attempts {
		workers = append(workers, a.Worker)
		if a.Stage == 3 {
			gate = append(gate, a.Verdict)
		}
	}
	assert.Equal(t, []string{"FAIL", "PASS"}, gate, text)
	assert.Contains(t, workers, "story-US-003-s2-fix1")
	assert.Contains(t, text, "Issues: go test -count=1 ./... (L1) failed: --- FAIL: TestMul")

	// The status report of the task graph, and the summary.
	assert.Contains(t, text, "[coordinator] Pipeline Status")
	assert.Contains(t, text, "Progress: 5/6 (83%)")
	assert.Contains(t, text, "5 merged, 1 paused, 0 not started")
	// US-002 is parked in the graph, not failed: nothing retries it, and the
	// run ends on the stall that names it.
	assert.Contains(t, text, "[|| US-002]")
	assert.Contains(t, text, "[coordinator] Parked, waiting for a person: US-002")
	assert.Contains(t, text, "[coordinator] Stalled: US-002 (parked)")
	assert.NotContains(t, text, "x=failed")
	// Every story's section, in whichever report files the run wrote (one
	// per UTC day a story started on), and no file left unlisted.
	require.NotEmpty(t, res.Reports, text)
	var reports strings.Builder
	for _, path := range res.Reports {
		data, err := os.ReadFile(path)
		require.NoError(t, err)
		reports.Write(data)
		assert.Contains(t, text, "run report  "+path)
	}
	reportDir := filepath.Dir(res.Reports[0])
	entries, err := os.ReadDir(reportDir)
	require.NoError(t, err)
	var onDisk []string
	for _, e := range entries {
		onDisk = append(onDisk, filepath.Join(reportDir, e.Name()))
	}
	assert.ElementsMatch(t, res.Reports, onDisk, "every report file written is reported")
	assert.Contains(t, reports.String(), "US-002: Abs: the absolute value — PAUSED")
	for _, id := range []foreman.ItemID{"US-001", "US-003", "US-004", "US-005", "US-006"} {
		assert.Contains(t, reports.String(), "### "+string(id)+": "+byID[id].Story.Title+" — DONE")
	}

	// Nothing left behind.
	assert.Equal(t, 1, len(strings.Split(strings.TrimSpace(git(t, res.Repo, "worktree", "list")), "\n")), "only the main worktree")
	wts, err := os.ReadDir(filepath.Join(res.Repo, ".worktrees"))
	if !os.IsNotExist(err) {
		require.NoError(t, err)
		assert.Empty(t, wts)
	}
	assert.Empty(t, leftovers(t, token), "processes left running")
}

// With -parallel 1 the task graph keeps to one story in progress: the
// other ready stories wait, pending, as "Ready to spawn" in its report,
// never shown as running before they start.
func TestParallelLimitHoldsReadyStories(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git, go vet and go test in real worktrees")
	}
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 3, parallel: 1, dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	text := out.String()
	for _, so := range res.Stories {
		assert.Equal(t, outcomeMerged, so.Status, "%s\n%s", so.Story.ID, text)
	}
	reports := strings.Split(text, "[coordinator] Pipeline Status")[1:]
	require.NotEmpty(t, reports, text)
	assert.Contains(t, reports[0], "[>>> US-001]")
	assert.Contains(t, reports[0], "[o US-002]")
	assert.Contains(t, reports[0], "[coordinator] Ready to spawn: US-002, US-003 (at most 1 active at once)")
	for i, r := range reports {
		assert.LessOrEqual(t, strings.Count(r, "[>>> "), 1, "report %d shows more than one story running:\n%s", i, r)
	}
	assert.Contains(t, text, "3 merged, 0 paused, 0 not started")
}

// Without -keep the run's directory is gone; one story, one at a time.
func TestQuickstartDeletesItsDirectory(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git, go vet and go test in real worktrees")
	}
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 1, parallel: 1, dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	require.Len(t, res.Stories, 1)
	assert.Equal(t, outcomeMerged, res.Stories[0].Status, out.String())
	assert.NoDirExists(t, res.Dir)
	assert.Contains(t, out.String(), "1 merged, 0 paused, 0 not started")
}

// -agent runs another command for stages 0-2: here a stand-in for an agent
// CLI that knows nothing of the demo and acts on the prompt alone (it
// writes the board JSON the prompt gives, a file, a commit, and the line
// the prompt asks for).
func TestAgentFlagRunsACommandOnThePrompt(t *testing.T) {
	if testing.Short() {
		t.Skip("runs git, go vet and go test in real worktrees")
	}
	bin := t.TempDir()
	cli, err := demo.WriteScript(bin, "fake-agent", `#!/bin/sh
set -eu
prompt="$1"
first=$(printf '%s\n' "$prompt" | head -n 1)           # Execute Stage N for ID
stage=$(printf '%s\n' "$first" | cut -d' ' -f3)
id=$(printf '%s\n' "$first" | cut -d' ' -f5)
board=$(printf '%s\n' "$prompt" | sed -n 's/.* to \(\/.*\.json\):$/\1/p; s/.* in \(\/.*\.json\), keeping.*/\1/p; s/.*(in \(\/.*\.json\)) are ready.*/\1/p' | head -n 1)
case "$stage" in
0) printf '%s\n' "$prompt" | grep '^  {"version"' | sed 's/^  //' > "$board"
   echo "I planned it."
   echo "Stage 0 COMPLETE for $id. 2 tasks created. Plan score: 3/4." ;;
1) sed -i 's/"Backlog"/"Todo"/' "$board"
   echo "Stage 1 COMPLETE for $id. Verdict: GO. Readiness: 7." ;;
2) f=$(echo "$id" | tr 'A-Z-' 'a-z_').go
   printf 'package calc\n\n// Answer%s is 42.\nconst Answer%s = 42\n' "$(echo "$id" | tr -d -)" "$(echo "$id" | tr -d -)" > "$f"
   git add "$f" && git commit -qm "$id: by the fake agent"
   sed -i 's/"Todo"/"To Review"/' "$board"
   echo "Stage 2 COMPLETE for $id. All tasks Done. Story set to To Review." ;;
esac
`)
	require.NoError(t, err)
	var out bytes.Buffer
	res, err := run(context.Background(), options{stories: 2, parallel: 2, agent: demo.ShellQuote(cli) + " {prompt}", dir: t.TempDir(), timeout: 3 * time.Minute}, &out)
	require.NoError(t, err, out.String())
	for _, so := range res.Stories {
		assert.Equal(t, outcomeMerged, so.Status, "%s\n%s", so.Story.ID, out.String())
	}
}

func TestOptionsValidate(t *testing.T) {
	tests := []struct {
		o    options
		want string
	}{
		{options{stories: 0, parallel: 1}, "-stories 0"},
		{options{stories: 21, parallel: 1}, "-stories 21"},
		{options{stories: 6, parallel: 0}, "-parallel 0"},
		{options{stories: 6, parallel: 1, agent: "'open"}, "unterminated single quote"},
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

// The prompt's first line is the seed's stage command and the worker's
// name follows: the driver reads both back.
func TestPromptRoundTrip(t *testing.T) {
	stories := demoStories(6)
	byID := map[foreman.ItemID]*story{}
	for _, s := range stories {
		byID[s.ID] = s
	}
	for stage := 0; stage <= 2; stage++ {
		p := prompt(byID, "/b", pipeline.SpawnRequest{Item: "US-003", Title: "Mul", Stage: stage,
			Worker: foreman.WorkerID(fmt.Sprintf("story-US-003-s%d", stage)), Feedback: "TestMul fails"})
		item, gotStage, worker, err := parsePrompt(p)
		require.NoError(t, err)
		assert.Equal(t, foreman.ItemID("US-003"), item)
		assert.Equal(t, stage, gotStage)
		assert.Equal(t, fmt.Sprintf("story-US-003-s%d", stage), worker)
		assert.Contains(t, p, "/b/US-003.json")
		assert.Contains(t, p, "Previous round: TestMul fails")
	}
	_, _, _, err := parsePrompt("do something")
	assert.Error(t, err)
}

// More stories than the demo's six are extras on top of US-001; every
// story's script renders.
func TestDemoStories(t *testing.T) {
	for _, n := range []int{1, 6, 9} {
		stories := demoStories(n)
		require.Len(t, stories, n)
		seen := map[foreman.ItemID]bool{}
		for _, s := range stories {
			require.NoError(t, s.ID.Validate())
			for _, b := range s.BlockedBy {
				assert.True(t, seen[b], "%s is blocked by a later story %s", s.ID, b)
			}
			seen[s.ID] = true
			body, err := scriptFor(s)
			require.NoError(t, err)
			assert.Contains(t, body, "Stage 2 COMPLETE for "+string(s.ID)+".")
		}
	}
}

func TestFailureSummary(t *testing.T) {
	out := "--- FAIL: TestMul (0.00s)\n    mul_test.go:7: Mul(2, 3) = 5, want 6\nFAIL\nFAIL\texample.com/calc\t0.002s\nFAIL\n"
	assert.Equal(t, "--- FAIL: TestMul (0.00s) mul_test.go:7: Mul(2, 3) = 5, want 6", failureSummary(out))
	assert.Equal(t, "something broke", failureSummary("something\n  broke\n"))
	assert.Len(t, failureSummary(strings.Repeat("x.go:1 ", 200)), 300+len("…"))
}

// A run that straddles UTC midnight: FileReporter files each story under the
// day it started, and the run lists both files, oldest first, each once.
func TestReportFilesListsEveryDayWritten(t *testing.T) {
	ctx := context.Background()
	r := &reportFiles{FileReporter: &pipeline.FileReporter{Root: t.TempDir()}}
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	late := time.Date(2026, 3, 1, 23, 59, 0, 0, time.UTC)
	early := late.Add(2 * time.Minute)
	for i, e := range []pipeline.ReportEntry{
		{Key: "b", Flow: flow, State: pipeline.State{Item: "US-002", Status: pipeline.StatusDone, Started: early}},
		{Key: "a", Flow: flow, State: pipeline.State{Item: "US-001", Status: pipeline.StatusDone, Started: late}},
		{Key: "c", Flow: flow, State: pipeline.State{Item: "US-003", Status: pipeline.StatusPaused, Started: early}},
	} {
		require.NoError(t, r.AppendReport(ctx, e), i)
	}
	paths := r.paths()
	require.Equal(t, []string{r.Path(late), r.Path(early)}, paths)
	assert.Equal(t, "pipeline-2026-03-01.md", filepath.Base(paths[0]))
	assert.Equal(t, "pipeline-2026-03-02.md", filepath.Base(paths[1]))
	for i, want := range [][]string{{"US-001"}, {"US-002", "US-003"}} {
		data, err := os.ReadFile(paths[i])
		require.NoError(t, err)
		for _, id := range want {
			assert.Contains(t, string(data), "### "+id+" — ")
		}
	}
}
