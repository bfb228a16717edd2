package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline/message"
)

func TestEventOfEveryWorkerMessage(t *testing.T) {
	cases := []struct {
		line string
		want Event
	}{
		{"Stage 0 COMPLETE for P-1. 3 tasks created. Plan score: 4/4.", Event{Kind: EventReport, Stage: 0, Outcome: Complete, Tasks: 3, Score: "4"}},
		{"Stage 0 ERROR for P-1: no epic", Event{Kind: EventReport, Stage: 0, Outcome: Error, Detail: "no epic"}},
		{"Stage 1 COMPLETE for P-1. Verdict: GO. Readiness: 8.", Event{Kind: EventReport, Stage: 1, Outcome: Go, Score: "8"}},
		{"Stage 1 COMPLETE for P-1. Verdict: NO-GO. Readiness: 3. Reason: vague", Event{Kind: EventReport, Stage: 1, Outcome: NoGo, Score: "3", Detail: "vague"}},
		{"Stage 1 ERROR for P-1: down", Event{Kind: EventReport, Stage: 1, Outcome: Error, Detail: "down"}},
		{"Stage 2 COMPLETE for P-1. All tasks Done. Story set to To Review.", Event{Kind: EventReport, Stage: 2, Outcome: Complete}},
		{"Stage 2 ERROR for P-1: red", Event{Kind: EventReport, Stage: 2, Outcome: Error, Detail: "red"}},
		{"Stage 3 COMPLETE for P-1. Verdict: WAIVED. Quality Score: 70/100.", Event{Kind: EventReport, Stage: 3, Outcome: Waived, Score: "70"}},
		{"Stage 3 COMPLETE for P-1. Verdict: FAIL. Quality Score: 40/100. Issues: no tests", Event{Kind: EventReport, Stage: 3, Outcome: Fail, Score: "40", Detail: "no tests"}},
		{"Stage 3 ERROR for P-1: gate", Event{Kind: EventReport, Stage: 3, Outcome: Error, Detail: "gate"}},
		{"Status for P-1: Stage 2 EXECUTING. Current step: tests.", Event{Kind: EventStatusReply, Stage: 2}},
		{"what?", Event{Kind: EventUnparseable, Detail: "what?"}},
	}
	for _, tc := range cases {
		env, _ := message.Open("w", "a", tc.line, time.Time{})
		got, ok := EventOf(env)
		require.True(t, ok, tc.line)
		tc.want.Worker, tc.want.Assignment = "w", "a"
		assert.Equal(t, tc.want, got, tc.line)
	}
	env, err := message.Open("w", "a", "ACK Stage 1 for P-1", time.Time{})
	require.NoError(t, err)
	_, ok := EventOf(env)
	assert.False(t, ok, "a coordinator's own line")
}

func TestFileBoard(t *testing.T) {
	ctx := context.Background()
	b := NewFileBoard(filepath.Join(t.TempDir(), "sub", "kanban.json"))
	s, err := b.Story(ctx, "P-1")
	require.NoError(t, err)
	assert.False(t, s.Found)
	require.NoError(t, b.AddTasks(ctx, "P-1", "T1", "T2"))
	require.NoError(t, b.SetStatus(ctx, "P-1", BoardTodo))
	s, err = b.Story(ctx, "P-1")
	require.NoError(t, err)
	assert.Equal(t, BoardStory{Found: true, Status: BoardTodo, Tasks: 2}, s)
	assert.ErrorIs(t, b.SetStatus(ctx, "../x", BoardTodo), foreman.ErrInvalidID)

	require.NoError(t, os.WriteFile(b.Path(), []byte(`{"version": 9, "items": {}}`), 0o644))
	_, err = b.Story(ctx, "P-1")
	assert.ErrorIs(t, err, ErrCorruptBoard)
	assert.ErrorIs(t, b.SetStatus(ctx, "P-1", BoardDone), ErrCorruptBoard)
	data, _ := os.ReadFile(b.Path())
	assert.Contains(t, string(data), `"version": 9`, "a newer board is kept")
	require.NoError(t, os.WriteFile(b.Path(), []byte(`{`), 0o644))
	_, err = b.Story(ctx, "P-1")
	assert.ErrorIs(t, err, ErrCorruptBoard)
}

func TestFileReporterAppendsEachSectionOnce(t *testing.T) {
	ctx := context.Background()
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 1)
	s, _ = mustStep(t, f, s, reportEv(s, 1, NoGo, "3", "vague"), t0.Add(90*time.Minute))
	s, _ = mustStep(t, f, s, reportEv(s, 1, NoGo, "4", "still | vague"), t0.Add(2*time.Hour))
	fr := &FileReporter{Root: t.TempDir()}
	e := ReportEntry{Key: "k1", Flow: f, State: s}
	require.NoError(t, fr.AppendReport(ctx, e))
	require.NoError(t, fr.AppendReport(ctx, e))
	data, err := os.ReadFile(filepath.Join(fr.Root, "docs", "tasks", "reports", "pipeline-2026-03-09.md"))
	require.NoError(t, err)
	want := `# Pipeline report 2026-03-09

<!-- foreman-report k1 -->
### PROJ-42: Login — PAUSED

| Stage | Result | Started | Duration | Details |
|-------|--------|---------|----------|---------|
| 0 | 3 tasks, 4/4 | 2026-03-09T10:00:00Z | 1m0s |  |
| 1 | NO-GO, 4, still \| vague (retries exhausted) | 2026-03-09T10:01:00Z | 1h59m0s | retries: 2 |
| 2 | skip | — | — | rework cycles: 0 |
| 3 | skip | — | — | crashes: 0 |

- **Problems:** Story PROJ-42 failed validation twice: still | vague
`
	assert.Equal(t, want, string(data))
	assert.Error(t, (&FileReporter{}).AppendReport(ctx, e))
}

func TestGitMergeOutcomes(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t)
	mgr, err := merge.New(ctx, merge.Config{Repo: repo, Author: merge.Identity(testIdentity)})
	require.NoError(t, err)
	g := Git{Manager: mgr}

	// Nothing committed: refused, for a person.
	require.NoError(t, g.CreateWorktree(ctx, "A-1"))
	out, err := g.Merge(ctx, MergeRequest{Item: "A-1"})
	require.NoError(t, err)
	assert.Contains(t, out.Refused, "nothing to merge")

	// Two items touching the same line: the second conflicts, naming the file.
	require.NoError(t, g.CreateWorktree(ctx, "B-1"))
	for _, it := range []foreman.ItemID{"A-1", "B-1"} {
		dir := must(mgr.Path(it))
		require.NoError(t, os.WriteFile(filepath.Join(dir, "README.md"), []byte(string(it)+"\n"), 0o644))
		git(t, dir, "commit", "-qam", "edit")
	}
	out, err = g.Merge(ctx, MergeRequest{Item: "A-1", Title: "first"})
	require.NoError(t, err)
	assert.NotEmpty(t, out.Commit)
	assert.False(t, out.Already)
	again, err := g.Merge(ctx, MergeRequest{Item: "A-1", Title: "first"})
	require.NoError(t, err)
	assert.True(t, again.Already)
	assert.Equal(t, out.Commit, again.Commit)
	out, err = g.Merge(ctx, MergeRequest{Item: "B-1"})
	require.NoError(t, err)
	assert.Equal(t, []string{"README.md"}, out.Conflict)

	require.NoError(t, g.RemoveWorktree(ctx, "B-1"))
	require.NoError(t, g.RemoveWorktree(ctx, "B-1"), "removing a missing worktree succeeds")
	d, err := g.DiffStat(ctx, "A-1")
	require.NoError(t, err)
	assert.Equal(t, 1, d.Files)
}

func TestStateSurvivesJSON(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 2)
	s, _ = mustStep(t, f, s, from(s, Event{Kind: EventIdle}), t0.Add(time.Hour))
	s, effs := mustStep(t, f, s, reportEv(s, 2, Error, "", "x"), t0.Add(2*time.Hour))
	rec := record{Format: recordFormat, State: s, Pending: effs}
	data, err := json.Marshal(rec)
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(data), `"status":"PAUSED"`))
	assert.True(t, strings.Contains(string(data), `"kind":"escalate"`))
	var back record
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Equal(t, rec, back)

	var st Status
	assert.Error(t, st.UnmarshalText([]byte("NOPE")))
	var k EffectKind
	assert.Error(t, k.UnmarshalText([]byte("nope")))
	_, err = EffectKind(0).MarshalText()
	assert.Error(t, err)
	_, err = Status(99).MarshalText()
	assert.Error(t, err)
	assert.Equal(t, "Status(99)", Status(99).String())
	assert.Equal(t, "EffectKind(99)", EffectKind(99).String())
	assert.Equal(t, "EventKind(99)", EventKind(99).String())
	assert.Equal(t, "Action(9)", Action(9).String())
}

// Stage durations keep milliseconds below a minute: a stage of a scripted
// or quick agent no longer shows as 0s.
func TestReportDurationsBelowAMinuteKeepMilliseconds(t *testing.T) {
	cases := []struct {
		d    time.Duration
		want string
	}{
		{0, "0s"},
		{250 * time.Millisecond, "250ms"},
		{1500*time.Millisecond + 400*time.Microsecond, "1.5s"},
		{59*time.Second + 999*time.Millisecond, "59.999s"},
		{time.Minute + 1400*time.Millisecond, "1m1s"},
		{2 * time.Hour, "2h0m0s"},
	}
	f := StoryFlow(StoryConfig{})
	for _, tc := range cases {
		s := State{Item: item, Status: StatusDone, Stages: []StageRecord{{Start: t0, End: t0.Add(tc.d), Result: "r"}}}
		out := RenderReport(ReportEntry{Key: "k", Flow: f, State: s}, nil)
		assert.Contains(t, out, "| 0 | r | 2026-03-09T10:00:00Z | "+tc.want+" |", tc.d.String())
	}
}
