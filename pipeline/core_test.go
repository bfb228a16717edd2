package pipeline

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
)

var t0 = time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)

const item foreman.ItemID = "PROJ-42"

// boardOK is a board that satisfies every check of StoryFlow at stage.
func boardOK(stage int) *BoardStory {
	switch stage {
	case 0:
		return &BoardStory{Found: true, Status: "Backlog", Tasks: 3}
	case 1:
		return &BoardStory{Found: true, Status: BoardTodo, Tasks: 3}
	case 2:
		return &BoardStory{Found: true, Status: BoardToReview, Tasks: 3}
	}
	return nil
}

// from returns an event sent by the item's current worker.
func from(s State, ev Event) Event {
	ev.Worker, ev.Assignment = s.Worker, s.Assignment
	return ev
}

func reportEv(s State, stage int, o Outcome, score, detail string) Event {
	ev := from(s, Event{Kind: EventReport, Stage: stage, Outcome: o, Score: score, Detail: detail, Tasks: 3})
	ev.Board = boardOK(stage)
	return ev
}

func mustStep(t testing.TB, f *Flow, s State, ev Event, now time.Time) (State, []Effect) {
	t.Helper()
	next, effs, err := f.Step(s, ev, now)
	require.NoError(t, err)
	return next, effs
}

// atStage returns a story started at t0 and advanced to stage.
func atStage(t testing.TB, f *Flow, stage int) State {
	t.Helper()
	s, _ := mustStep(t, f, State{Item: item, Title: "Login"}, Event{Kind: EventStart, Title: "Login"}, t0)
	outcomes := []Outcome{Complete, Go, Complete}
	scores := []string{"4", "8", ""} // plan score /4, readiness /10
	for i := 0; i < stage; i++ {
		s, _ = mustStep(t, f, s, reportEv(s, i, outcomes[i], scores[i], ""), t0.Add(time.Duration(i+1)*time.Minute))
	}
	require.Equal(t, stage, s.Stage)
	require.Equal(t, StatusActive, s.Status)
	return s
}

func kinds(effs []Effect) []EffectKind {
	out := make([]EffectKind, len(effs))
	for i, e := range effs {
		out[i] = e.Kind
	}
	return out
}

type handlerCase struct {
	name      string
	stage     int
	prepare   func(t *testing.T, f *Flow, s State) State
	ev        func(s State) Event
	status    Status
	nextStage int
	worker    foreman.WorkerID
	effects   []EffectKind
	result    string // the result recorded at the report's stage
	escalate  string
	reason    PauseReason
}

func runHandlerCases(t *testing.T, cases []handlerCase) {
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := StoryFlow(StoryConfig{})
			s := atStage(t, f, tc.stage)
			if tc.prepare != nil {
				s = tc.prepare(t, f, s)
			}
			old := s
			now := t0.Add(time.Hour)
			next, effs, err := f.Step(s, tc.ev(s), now)
			require.NoError(t, err)
			assert.Equal(t, tc.status, next.Status)
			assert.Equal(t, tc.nextStage, next.Stage)
			assert.Equal(t, tc.worker, next.Worker)
			assert.Equal(t, tc.effects, kinds(effs))
			assert.Equal(t, tc.result, next.Stages[tc.stage].Result)
			if len(effs) > 0 && effs[0].Kind == EffectAck {
				assert.Equal(t, old.Worker, effs[0].Worker, "the ACK goes to the sender")
				assert.Equal(t, AckText(item, tc.stage), effs[0].Text())
			}
			for _, e := range effs {
				if e.Kind == EffectShutdown {
					assert.Equal(t, old.Worker, e.Worker, "the old worker is shut down")
				}
				if e.Kind == EffectSpawn {
					assert.Equal(t, next.Worker, e.Worker)
					assert.Equal(t, next.Assignment, e.Assignment)
					assert.NotEqual(t, old.Assignment, e.Assignment, "a fresh assignment")
				}
			}
			if tc.status == StatusPaused {
				require.NotNil(t, next.Pause)
				assert.Equal(t, tc.escalate, next.Pause.Message)
				assert.Equal(t, tc.reason, next.Pause.Reason)
				assert.NotEmpty(t, next.Pause.SuggestedAction)
				assert.False(t, next.Worktree, "worktree removed on pause")
			}
			assert.Equal(t, now, next.Stages[tc.stage].End, "stage end stamped")
		})
	}
}

var (
	ackShutSpawn = []EffectKind{EffectAck, EffectShutdown, EffectSpawn}
	ackPause     = []EffectKind{EffectAck, EffectRemoveWorktree, EffectEscalate, EffectShutdown, EffectAppendReport}
)

func TestStage0Handlers(t *testing.T) {
	runHandlerCases(t, []handlerCase{{
		name: "COMPLETE with tasks on the board", stage: 0,
		ev:     func(s State) Event { return reportEv(s, 0, Complete, "4", "") },
		status: StatusActive, nextStage: 1, worker: "story-PROJ-42-s1", effects: ackShutSpawn,
		result: "3 tasks, 4/4",
	}, {
		name: "COMPLETE without tasks pauses", stage: 0,
		ev: func(s State) Event {
			ev := reportEv(s, 0, Complete, "4", "")
			ev.Board = &BoardStory{Found: true, Status: "Backlog"}
			return ev
		},
		status: StatusPaused, nextStage: 0, worker: "story-PROJ-42-s0", effects: ackPause,
		result:   "BOARD CHECK FAILED: no tasks under the item",
		escalate: "Board check failed for Story PROJ-42 after Stage 0: no tasks under the item", reason: ReasonBoardCheck,
	}, {
		name: "ERROR pauses", stage: 0,
		ev:     func(s State) Event { return reportEv(s, 0, Error, "", "no epic") },
		status: StatusPaused, nextStage: 0, worker: "story-PROJ-42-s0", effects: ackPause,
		result: "ERROR: no epic", escalate: "Cannot create tasks for Story PROJ-42: no epic", reason: ReasonStageError,
	}})
}

func TestStage1Handlers(t *testing.T) {
	noGoOnce := func(t *testing.T, f *Flow, s State) State {
		s, _ = mustStep(t, f, s, reportEv(s, 1, NoGo, "3", "vague"), t0.Add(30*time.Minute))
		require.Equal(t, foreman.WorkerID("story-PROJ-42-s1-retry"), s.Worker)
		return s
	}
	runHandlerCases(t, []handlerCase{{
		name: "GO advances and keeps readiness", stage: 1,
		ev:     func(s State) Event { return reportEv(s, 1, Go, "8", "") },
		status: StatusActive, nextStage: 2, worker: "story-PROJ-42-s2", effects: ackShutSpawn,
		result: "GO, 8",
	}, {
		name: "GO with the story not in Todo pauses", stage: 1,
		ev: func(s State) Event {
			ev := reportEv(s, 1, Go, "8", "")
			ev.Board = &BoardStory{Found: true, Status: "Backlog", Tasks: 3}
			return ev
		},
		status: StatusPaused, nextStage: 1, worker: "story-PROJ-42-s1", effects: ackPause,
		result:   `BOARD CHECK FAILED: status is "Backlog", want "Todo"`,
		escalate: `Board check failed for Story PROJ-42 after Stage 1: status is "Backlog", want "Todo"`, reason: ReasonBoardCheck,
	}, {
		name: "first NO-GO retries with a fresh validator", stage: 1,
		ev:     func(s State) Event { return reportEv(s, 1, NoGo, "3", "vague") },
		status: StatusActive, nextStage: 1, worker: "story-PROJ-42-s1-retry", effects: ackShutSpawn,
		result: "NO-GO, 3, vague",
	}, {
		name: "second NO-GO pauses", stage: 1, prepare: noGoOnce,
		ev:     func(s State) Event { return reportEv(s, 1, NoGo, "4", "still vague") },
		status: StatusPaused, nextStage: 1, worker: "story-PROJ-42-s1-retry", effects: ackPause,
		result:   "NO-GO, 4, still vague (retries exhausted)",
		escalate: "Story PROJ-42 failed validation twice: still vague", reason: ReasonRetriesExhausted,
	}, {
		name: "GO after a retry advances", stage: 1, prepare: noGoOnce,
		ev:     func(s State) Event { return reportEv(s, 1, Go, "7", "") },
		status: StatusActive, nextStage: 2, worker: "story-PROJ-42-s2", effects: ackShutSpawn,
		result: "GO, 7",
	}, {
		name: "ERROR pauses", stage: 1,
		ev:     func(s State) Event { return reportEv(s, 1, Error, "", "tool down") },
		status: StatusPaused, nextStage: 1, worker: "story-PROJ-42-s1", effects: ackPause,
		result: "ERROR: tool down", escalate: "Story PROJ-42 validation failed: tool down", reason: ReasonStageError,
	}})
}

func TestStage2Handlers(t *testing.T) {
	runHandlerCases(t, []handlerCase{{
		name: "COMPLETE with the story To Review advances", stage: 2,
		ev:     func(s State) Event { return reportEv(s, 2, Complete, "", "") },
		status: StatusActive, nextStage: 3, worker: "story-PROJ-42-s3", effects: ackShutSpawn,
		result: "Done",
	}, {
		name: "COMPLETE with the story elsewhere pauses", stage: 2,
		ev: func(s State) Event {
			ev := reportEv(s, 2, Complete, "", "")
			ev.Board = nil
			return ev
		},
		status: StatusPaused, nextStage: 2, worker: "story-PROJ-42-s2", effects: ackPause,
		result:   "BOARD CHECK FAILED: item not on the board",
		escalate: "Board check failed for Story PROJ-42 after Stage 2: item not on the board", reason: ReasonBoardCheck,
	}, {
		name: "ERROR pauses", stage: 2,
		ev:     func(s State) Event { return reportEv(s, 2, Error, "", "tests broken") },
		status: StatusPaused, nextStage: 2, worker: "story-PROJ-42-s2", effects: ackPause,
		result: "ERROR: tests broken", escalate: "Story PROJ-42 execution failed: tests broken", reason: ReasonStageError,
	}})
}

func TestStage3Handlers(t *testing.T) {
	failOnce := func(t *testing.T, f *Flow, s State) State {
		s, _ = mustStep(t, f, s, reportEv(s, 3, Fail, "40", "no tests"), t0.Add(30*time.Minute))
		require.Equal(t, foreman.WorkerID("story-PROJ-42-s2-fix1"), s.Worker)
		require.Equal(t, 2, s.Stage)
		s, _ = mustStep(t, f, s, reportEv(s, 2, Complete, "", ""), t0.Add(40*time.Minute))
		require.Equal(t, 3, s.Stage)
		return s
	}
	merge := []EffectKind{EffectAck, EffectShutdown, EffectMerge}
	cases := []handlerCase{}
	for _, o := range []Outcome{Pass, Concerns, Waived} {
		cases = append(cases, handlerCase{
			name: string(o) + " merges before DONE", stage: 3,
			ev:     func(s State) Event { return reportEv(s, 3, o, "92", "") },
			status: StatusMerging, nextStage: 3, worker: "story-PROJ-42-s3", effects: merge,
			result: string(o) + " 92/100",
		})
	}
	cases = append(cases, handlerCase{
		name: "first FAIL reworks at Stage 2", stage: 3,
		ev:     func(s State) Event { return reportEv(s, 3, Fail, "40", "no tests") },
		status: StatusActive, nextStage: 2, worker: "story-PROJ-42-s2-fix1", effects: ackShutSpawn,
		result: "FAIL 40/100",
	}, handlerCase{
		name: "second FAIL pauses", stage: 3, prepare: failOnce,
		ev:     func(s State) Event { return reportEv(s, 3, Fail, "45", "still no tests") },
		status: StatusPaused, nextStage: 3, worker: "story-PROJ-42-s3", effects: ackPause,
		result:   "FAIL 45/100 (cycles exhausted)",
		escalate: "Story PROJ-42 failed quality gate 2 times", reason: ReasonRetriesExhausted,
	}, handlerCase{
		name: "PASS after a rework merges", stage: 3, prepare: failOnce,
		ev:     func(s State) Event { return reportEv(s, 3, Pass, "90", "") },
		status: StatusMerging, nextStage: 3, worker: "story-PROJ-42-s3", effects: merge,
		result: "PASS 90/100",
	}, handlerCase{
		name: "ERROR pauses", stage: 3,
		ev:     func(s State) Event { return reportEv(s, 3, Error, "", "gate crashed") },
		status: StatusPaused, nextStage: 3, worker: "story-PROJ-42-s3", effects: ackPause,
		result: "ERROR: gate crashed", escalate: "Story PROJ-42 quality gate failed: gate crashed", reason: ReasonStageError,
	})
	runHandlerCases(t, cases)
}

func TestReadinessKeptForStage3AndFeedbackForRework(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 3)
	assert.Equal(t, "8", s.Readiness)
	s, effs := mustStep(t, f, s, reportEv(s, 3, Fail, "40", "no tests"), t0.Add(time.Hour))
	spawn := effs[2]
	assert.Equal(t, "no tests", spawn.Feedback)
	assert.Equal(t, "8", spawn.Readiness)
	assert.Equal(t, 2, spawn.Stage)
	assert.Equal(t, t0.Add(time.Hour), s.Stages[2].Start, "rework restarts the Stage 2 timer")
	assert.True(t, s.Stages[2].End.IsZero())
}

func TestMergeOutcomes(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 3)
	s, _ = mustStep(t, f, s, reportEv(s, 3, Pass, "92", ""), t0.Add(time.Hour))
	require.Equal(t, StatusMerging, s.Status)

	done, effs := mustStep(t, f, s, Event{Kind: EventMerged, Commit: "abc"}, t0.Add(2*time.Hour))
	assert.Equal(t, StatusDone, done.Status)
	assert.Equal(t, "abc", done.Commit)
	assert.Equal(t, []EffectKind{EffectUpdateBoard, EffectAppendReport, EffectRemoveWorktree}, kinds(effs))
	assert.Equal(t, BoardDone, effs[0].BoardStatus)
	assert.False(t, done.Worktree)

	conflict, effs := mustStep(t, f, s, Event{Kind: EventMergeConflict, Files: []string{"a.go", "b.go"}}, t0.Add(2*time.Hour))
	assert.Equal(t, StatusPaused, conflict.Status)
	assert.Equal(t, []EffectKind{EffectEscalate, EffectAppendReport}, kinds(effs), "the worktree is kept for the person")
	assert.True(t, conflict.Worktree)
	assert.Equal(t, "Merge conflict in Story PROJ-42: a.go, b.go. Manual resolution required.", conflict.Pause.Message)
	assert.Equal(t, []string{"a.go", "b.go"}, effs[0].Escalation.Files)
	assert.Equal(t, ReasonMergeConflict, conflict.Pause.Reason)

	failed, effs := mustStep(t, f, s, Event{Kind: EventMergeFailed, Detail: "nothing to merge"}, t0.Add(2*time.Hour))
	assert.Equal(t, StatusPaused, failed.Status)
	assert.Equal(t, ReasonMergeFailed, failed.Pause.Reason)
	assert.Equal(t, []EffectKind{EffectEscalate, EffectAppendReport}, kinds(effs))
}

func TestStartAndResolve(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s, effs := mustStep(t, f, State{Item: item}, Event{Kind: EventStart, Title: "Login"}, t0)
	assert.Equal(t, StatusActive, s.Status)
	assert.Equal(t, foreman.WorkerID("story-PROJ-42-s0"), s.Worker)
	assert.Equal(t, foreman.AssignmentID("PROJ-42-a1"), s.Assignment)
	assert.Equal(t, []EffectKind{EffectCreateWorktree, EffectSpawn}, kinds(effs))
	assert.Equal(t, t0, s.Stages[0].Start)

	_, _, err := f.Step(State{Item: "../x"}, Event{Kind: EventStart}, t0)
	assert.ErrorIs(t, err, foreman.ErrInvalidID)

	s, _ = mustStep(t, f, s, reportEv(s, 0, Error, "", "boom"), t0.Add(time.Minute))
	require.Equal(t, StatusPaused, s.Status)
	r, effs := mustStep(t, f, s, Event{Kind: EventResolve, Stage: 0, Detail: "epic added"}, t0.Add(time.Hour))
	assert.Equal(t, StatusActive, r.Status)
	assert.Nil(t, r.Pause)
	assert.True(t, r.Worktree)
	assert.Equal(t, "epic added", r.Feedback)
	assert.Equal(t, []EffectKind{EffectCreateWorktree, EffectSpawn}, kinds(effs))
	assert.Equal(t, foreman.AssignmentID("PROJ-42-a2"), r.Assignment)

	_, _, err = f.Step(s, Event{Kind: EventResolve, Stage: 9}, t0)
	assert.ErrorIs(t, err, ErrInvalidTransition)
}

// Every (status, event) pair: defined ones are reachable, the rest are
// typed errors that leave the state alone.
func TestStatusEventTable(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	states := map[Status]State{StatusNew: {Item: item}}
	states[StatusActive] = atStage(t, f, 3)
	m := atStage(t, f, 3)
	m, _ = mustStep(t, f, m, reportEv(m, 3, Pass, "90", ""), t0)
	states[StatusMerging] = m
	states[StatusDone], _ = mustStep(t, f, m, Event{Kind: EventMerged}, t0)
	states[StatusPaused], _ = mustStep(t, f, m, Event{Kind: EventMergeConflict}, t0)
	for st := StatusNew; st < numStatuses; st++ {
		for ev := EventStart; ev < numEventKinds; ev++ {
			s := states[st]
			e := from(s, Event{Kind: ev, Stage: s.Stage, Outcome: Pass, Score: "90"})
			if ev == EventLandRejected {
				e.Outcome = Fail // a lander's feedback is a failure
			}
			next, _, err := f.Step(s, e, t0)
			if table[st][ev] == invalid {
				var te *TransitionError
				require.ErrorAs(t, err, &te, "%s/%s", st, ev)
				assert.Equal(t, s, next)
				continue
			}
			assert.NoError(t, err, "%s/%s", st, ev)
		}
	}
	_, _, err := f.Step(states[StatusActive], Event{Kind: 0}, t0)
	assert.ErrorIs(t, err, ErrInvalidTransition)
	_, _, err = f.Step(states[StatusActive], Event{Kind: numEventKinds}, t0)
	assert.ErrorIs(t, err, ErrInvalidTransition)
}

func TestUndefinedOutcomeIsTypedError(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 0)
	next, effs, err := f.Step(s, reportEv(s, 0, Go, "", ""), t0)
	var te *TransitionError
	require.True(t, errors.As(err, &te))
	assert.Equal(t, Go, te.Outcome)
	assert.Equal(t, s, next)
	assert.Empty(t, effs)
	assert.Contains(t, err.Error(), "no rule for Stage 0 GO")
}

func TestLimitsConfigurable(t *testing.T) {
	f := StoryFlow(StoryConfig{ValidationRetries: 2, QualityCycles: 3})
	s := atStage(t, f, 1)
	for i := 0; i < 2; i++ {
		s, _ = mustStep(t, f, s, reportEv(s, 1, NoGo, "3", "vague"), t0)
		require.Equal(t, StatusActive, s.Status)
	}
	s, _ = mustStep(t, f, s, reportEv(s, 1, NoGo, "3", "vague"), t0)
	assert.Equal(t, "Story PROJ-42 failed validation 3 times: vague", s.Pause.Message)
	assert.Equal(t, 2, s.Pause.Limit)

	s = atStage(t, f, 3)
	for i := 1; i <= 2; i++ {
		s, _ = mustStep(t, f, s, reportEv(s, 3, Fail, "3", "x"), t0)
		require.Equal(t, StatusActive, s.Status)
		require.Equal(t, foreman.WorkerID("story-PROJ-42-s2-fix"+string(rune('0'+i))), s.Worker)
		s, _ = mustStep(t, f, s, reportEv(s, 2, Complete, "", ""), t0)
	}
	s, _ = mustStep(t, f, s, reportEv(s, 3, Fail, "3", "x"), t0)
	assert.Equal(t, StatusPaused, s.Status)
	assert.Equal(t, 3, s.Pause.Failures)
}

func TestStepDoesNotModifyItsInput(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 3)
	before := s
	before.Stages = append([]StageRecord(nil), s.Stages...)
	_, _ = mustStep(t, f, s, reportEv(s, 3, Fail, "40", "x"), t0.Add(time.Hour))
	assert.Equal(t, before, s)
}

// Scores outside pipeline/message's ranges (plan 0..4, readiness 0..10,
// quality 0..100) are refused with a typed error, as Parse refuses them in
// text, and change nothing.
func TestReportScoresOutsideTheirRangeAreRefused(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	cases := []struct {
		stage   int
		outcome Outcome
		score   string
		ok      bool
	}{
		{0, Complete, "4", true},
		{0, Complete, "0", true},
		{0, Complete, "8", false},
		{0, Complete, "-1", false},
		{0, Complete, "", false},
		{0, Complete, "04", false},
		{1, Go, "10", true},
		{1, Go, "11", false},
		{1, NoGo, "12", false},
		{3, Pass, "100", true},
		{3, Concerns, "101", false},
		{3, Fail, "x", false},
		{0, Error, "", true},
		{2, Complete, "", true},
	}
	for _, tc := range cases {
		t.Run(fmt.Sprintf("%d/%s/%q", tc.stage, tc.outcome, tc.score), func(t *testing.T) {
			s := atStage(t, f, tc.stage)
			next, effs, err := f.Step(s, reportEv(s, tc.stage, tc.outcome, tc.score, "d"), t0.Add(time.Hour))
			if tc.ok {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrInvalidReport)
			var re *ReportError
			require.ErrorAs(t, err, &re)
			assert.Equal(t, tc.score, re.Score)
			assert.Empty(t, effs)
			assert.Equal(t, s, next)
		})
	}
}
