package pipeline

import (
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Logs and escalations name actions by these words; an unknown value is
// shown as a number rather than as one of them.
func TestActionStringNamesEveryAction(t *testing.T) {
	for _, tt := range []struct {
		a    Action
		want string
	}{
		{Advance, "advance"}, {Retry, "retry"}, {Rework, "rework"}, {Pause, "pause"}, {MergeDone, "merge"},
		{Action(99), "Action(99)"},
	} {
		assert.Equal(t, tt.want, tt.a.String())
	}
}

// A report whose score is outside its rule's range is refused with a
// *ReportError that names the item, the stage, the score and the range, and
// the state does not move.
func TestReportWithAScoreOutOfRangeIsRefused(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	tests := []struct {
		name    string
		stage   int
		outcome Outcome
		score   string
		want    string
	}{
		{"plan score above 4", 0, Complete, "5", `pipeline: item PROJ-42: Stage 0 COMPLETE score "5" is not a number in 0..4`},
		{"negative plan score", 0, Complete, "-1", `Stage 0 COMPLETE score "-1" is not a number in 0..4`},
		{"plan score with a leading zero", 0, Complete, "04", `score "04" is not a number in 0..4`},
		{"readiness not a number", 1, Go, "high", `pipeline: item PROJ-42: Stage 1 GO score "high" is not a number in 0..10`},
		{"readiness above 10", 1, Go, "11", `Stage 1 GO score "11" is not a number in 0..10`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := atStage(t, f, tt.stage)
			next, effs, err := f.Step(s, reportEv(s, tt.stage, tt.outcome, tt.score, ""), t0.Add(time.Hour))
			require.ErrorIs(t, err, ErrInvalidReport)
			var re *ReportError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tt.stage, re.Stage)
			assert.Equal(t, tt.score, re.Score)
			assert.Contains(t, err.Error(), tt.want)
			assert.Empty(t, effs)
			assert.Equal(t, s, next, "the state is unchanged")
		})
	}
	t.Run("in range", func(t *testing.T) {
		s := atStage(t, f, 0)
		next, _, err := f.Step(s, reportEv(s, 0, Complete, "4", ""), t0.Add(time.Hour))
		require.NoError(t, err)
		assert.Equal(t, 1, next.Stage)
	})
}

// TaskFlow is one stage: a COMPLETE report merges the item, an ERROR pauses
// it with the task's escalation, and a confirmed crash resumes a
// "task-{id}-retry" worker once before it pauses.
func TestTaskFlowRunsOneStage(t *testing.T) {
	f := TaskFlow(StoryConfig{})
	start := func(t *testing.T) State {
		s, effs := mustStep(t, f, State{Item: item, Title: "Fix the parser"}, Event{Kind: EventStart, Title: "Fix the parser"}, t0)
		require.Equal(t, []EffectKind{EffectCreateWorktree, EffectSpawn}, kinds(effs))
		assert.Equal(t, "task-PROJ-42", string(effs[1].Worker))
		assert.Equal(t, StatusActive, s.Status)
		require.Len(t, s.Stages, 1)
		return s
	}

	t.Run("complete merges", func(t *testing.T) {
		s := start(t)
		// The task count and score of a one-stage flow's report are not read.
		s, effs := mustStep(t, f, s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Complete, Score: "99"}), t0.Add(time.Minute))
		assert.Equal(t, []EffectKind{EffectAck, EffectShutdown, EffectMerge}, kinds(effs))
		assert.Equal(t, "Fix the parser", effs[2].Title)
		assert.Equal(t, StatusMerging, s.Status)
		assert.Equal(t, "Done", s.Stages[0].Result)

		s, effs = mustStep(t, f, s, Event{Kind: EventMerged, Commit: "abc123"}, t0.Add(2*time.Minute))
		assert.Equal(t, StatusDone, s.Status)
		assert.Equal(t, "abc123", s.Commit)
		assert.Contains(t, kinds(effs), EffectUpdateBoard)
		for _, e := range effs {
			if e.Kind == EffectUpdateBoard {
				assert.Equal(t, BoardDone, e.BoardStatus)
			}
		}
	})

	t.Run("error pauses with the task's escalation", func(t *testing.T) {
		s := start(t)
		s, effs := mustStep(t, f, s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Error, Detail: "go.mod is missing"}), t0.Add(time.Minute))
		assert.Equal(t, StatusPaused, s.Status)
		require.NotNil(t, s.Pause)
		assert.Equal(t, ReasonStageError, s.Pause.Reason)
		assert.Equal(t, "Task PROJ-42 failed: go.mod is missing", s.Pause.Message)
		assert.Equal(t, "ERROR: go.mod is missing", s.Stages[0].Result)
		assert.Contains(t, kinds(effs), EffectEscalate)
	})

	t.Run("a report this flow has no rule for is a transition error", func(t *testing.T) {
		s := start(t)
		_, _, err := f.Step(s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Pass}), t0.Add(time.Minute))
		var te *TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, Pass, te.Outcome)
		assert.Equal(t, "pipeline: item PROJ-42: no rule for Stage 0 PASS (status ACTIVE)", err.Error())
	})
}

// An event the status does not define says which event and which status.
func TestTransitionErrorNamesTheEventAndStatus(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 1)
	_, _, err := f.Step(s, Event{Kind: EventMerged, Commit: "abc"}, t0.Add(time.Hour))
	require.True(t, errors.Is(err, ErrInvalidTransition), "%v", err)
	assert.Equal(t, "pipeline: item PROJ-42: event Merged not defined in status ACTIVE", err.Error())
}
