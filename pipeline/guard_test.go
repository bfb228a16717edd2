package pipeline

import (
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
)

func TestSenderValidationIgnoresStaleMessages(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 2)
	cases := []struct {
		name   string
		worker foreman.WorkerID
		assign foreman.AssignmentID
	}{
		{"unknown worker", "story-PROJ-42-s9", s.Assignment},
		{"right name, old assignment (a reused name)", s.Worker, "PROJ-42-a1"},
		{"old worker, old assignment, not its stage", "story-PROJ-42-s0", "PROJ-42-a1"},
	}
	for _, tc := range cases {
		for _, kind := range []EventKind{EventReport, EventIdle, EventStatusReply, EventProbeTimeout, EventUnparseable} {
			t.Run(fmt.Sprintf("%s/%s", tc.name, kind), func(t *testing.T) {
				ev := Event{Kind: kind, Worker: tc.worker, Assignment: tc.assign, Stage: 2, Outcome: Complete, Board: boardOK(2)}
				next, effs, err := f.Step(s, ev, t0.Add(time.Hour))
				require.NoError(t, err)
				assert.Empty(t, effs, "never applied")
				assert.Equal(t, s.Stale+1, next.Stale, "counted")
				next.Stale, next.Updated = s.Stale, s.Updated
				assert.Equal(t, s, next, "nothing else changes")
			})
		}
	}
}

func TestStateGuardReAcksDuplicates(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s0 := atStage(t, f, 0)
	ev := reportEv(s0, 0, Complete, "4", "")
	s1, _ := mustStep(t, f, s0, ev, t0.Add(time.Minute))
	require.Equal(t, 1, s1.Stage)

	// The same report again, from the worker that sent it (its ACK was lost):
	// re-ACKed to that worker, not reprocessed (no second spawn).
	dup, effs, err := f.Step(s1, ev, t0.Add(2*time.Minute))
	require.NoError(t, err)
	require.Equal(t, []EffectKind{EffectAck}, kinds(effs))
	assert.Equal(t, s0.Worker, effs[0].Worker)
	assert.Equal(t, "ACK Stage 0 for PROJ-42", effs[0].Text())
	assert.Equal(t, 1, dup.Duplicates)
	assert.Equal(t, s1.Worker, dup.Worker)
	assert.Equal(t, s1.Stages, dup.Stages)

	// The current worker reporting a stage the item is not in: the seed's
	// state guard: re-ACK, do not reprocess.
	cur := reportEv(s1, 0, Complete, "4", "")
	dup, effs = mustStep(t, f, s1, cur, t0.Add(3*time.Minute))
	assert.Equal(t, []EffectKind{EffectAck}, kinds(effs))
	assert.Equal(t, s1.Worker, effs[0].Worker)
	assert.Equal(t, 1, dup.Duplicates)
	assert.Equal(t, 1, dup.Stage)

	// After the merge: a repeated PASS is a duplicate in MERGING and DONE.
	s3 := atStage(t, f, 3)
	pass := reportEv(s3, 3, Pass, "90", "")
	m, _ := mustStep(t, f, s3, pass, t0)
	for _, st := range []State{m, func() State { d, _ := mustStep(t, f, m, Event{Kind: EventMerged}, t0); return d }()} {
		d, effs := mustStep(t, f, st, pass, t0)
		assert.Equal(t, []EffectKind{EffectAck}, kinds(effs), st.Status.String())
		assert.Equal(t, st.Status, d.Status)
		assert.Equal(t, 1, d.Duplicates)
	}

	// Duplicate ACKs get their own keys, so a second one is really sent.
	_, e1 := mustStep(t, f, s1, ev, t0)
	d1, _ := mustStep(t, f, s1, ev, t0)
	_, e2 := mustStep(t, f, d1, ev, t0)
	assert.NotEqual(t, e1[0].Key(), e2[0].Key())
}

func TestIdleFromFinishedWorkerIsExpected(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s0 := atStage(t, f, 0)
	s1, _ := mustStep(t, f, s0, reportEv(s0, 0, Complete, "4", ""), t0)
	next, effs := mustStep(t, f, s1, from(s0, Event{Kind: EventIdle}), t0)
	assert.Empty(t, effs)
	assert.Equal(t, s1, next, "neither stale nor a crash")
}

func TestAssignmentFencesReusedWorkerNames(t *testing.T) {
	// A crash retry reuses no name here, but a NO-GO retry after a resolve
	// does: the seed's lesson is that a late report from an old worker with
	// the current name must not complete the new worker's stage.
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 1)
	s, _ = mustStep(t, f, s, reportEv(s, 1, Error, "", "x"), t0)
	old := s
	s, _ = mustStep(t, f, s, Event{Kind: EventResolve, Stage: 1}, t0)
	require.Equal(t, old.Worker, s.Worker, "the same name again")
	require.NotEqual(t, old.Assignment, s.Assignment)
	late := reportEv(old, 1, Go, "8", "")
	late.Assignment = "PROJ-42-a1"
	next, effs := mustStep(t, f, s, late, t0)
	assert.Empty(t, effs)
	assert.Equal(t, 1, next.Stale)
	assert.Equal(t, StatusActive, next.Status)
	assert.Equal(t, 1, next.Stage)
}

// Every rule of StoryFlow is taken at least once by the tests above; this
// walks them again in one place, checking each rule's action took effect,
// so that a new rule is tested as soon as it exists and a rule with a new
// kind of action fails until this test checks it.
func TestEveryStoryFlowRuleReachable(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	require.NoError(t, f.Validate())
	for stage, st := range f.Stages {
		for _, r := range st.Rules {
			t.Run(fmt.Sprintf("%d/%s", stage, r.Outcome), func(t *testing.T) {
				s := atStage(t, f, stage)
				next, effs := mustStep(t, f, s, reportEv(s, stage, r.Outcome, "4", "d"), t0.Add(time.Hour))
				require.NotEmpty(t, effs)
				assert.Equal(t, EffectAck, effs[0].Kind)
				switch r.Action {
				case Advance:
					assert.Equal(t, stage+1, next.Stage)
				case Retry:
					assert.Equal(t, stage, next.Stage)
					assert.Equal(t, StatusActive, next.Status)
				case Rework:
					assert.Equal(t, r.Target, next.Stage)
				case Pause:
					assert.Equal(t, StatusPaused, next.Status)
				case MergeDone:
					assert.Equal(t, StatusMerging, next.Status)
				default:
					t.Fatalf("the rule's action %v has no check in this test: add one", r.Action)
				}
			})
		}
	}
}

func TestFlowValidate(t *testing.T) {
	bad := []*Flow{
		{},
		{Stages: []StageSpec{{Rules: []Rule{{Outcome: Complete, Action: Advance}}}}},
		{Stages: []StageSpec{{Rules: []Rule{{Outcome: Fail, Action: Rework, Target: 0}}}}},
		{Stages: []StageSpec{{Rules: []Rule{{Outcome: Fail, Action: Retry, Limit: -1}}}}},
		{Stages: []StageSpec{{Rules: []Rule{{Outcome: Fail}}}}},
		{Stages: []StageSpec{{Rules: []Rule{{Outcome: Fail, Action: Pause}, {Outcome: Fail, Action: Pause}}}}},
	}
	for i, f := range bad {
		assert.ErrorIs(t, f.Validate(), ErrInvalidFlow, "flow %d", i)
	}
}

func TestLongIDsMakeValidNames(t *testing.T) {
	long := foreman.ItemID("A" + string(make([]byte, 0)) + fmt.Sprintf("%063d", 7))
	require.NoError(t, long.Validate())
	f := StoryFlow(StoryConfig{})
	s, _ := mustStep(t, f, State{Item: long}, Event{Kind: EventStart}, t0)
	assert.NoError(t, s.Worker.Validate())
	assert.NoError(t, s.Assignment.Validate())
}

// A report that carries no assignment id cannot be told from a late one of
// an earlier worker with the same name: once the item has a current
// assignment, it is stale. The case that let it through: after a Stage 3
// FAIL the rework's Stage 2 spawns story-{id}-s3 again, and a late PASS from
// the first story-{id}-s3, sent without its assignment id, must not move the
// item to MERGING.
func TestEmptyAssignmentIsStaleAfterRework(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 3)
	first := s
	s, _ = mustStep(t, f, s, reportEv(s, 3, Fail, "40", "no tests"), t0)
	require.Equal(t, 2, s.Stage)
	s, _ = mustStep(t, f, s, reportEv(s, 2, Complete, "", ""), t0)
	require.Equal(t, 3, s.Stage)
	require.Equal(t, first.Worker, s.Worker, "story-PROJ-42-s3 again")
	require.NotEqual(t, first.Assignment, s.Assignment)

	late := reportEv(first, 3, Pass, "90", "")
	late.Assignment = ""
	for _, kind := range []EventKind{EventReport, EventIdle, EventStatusReply, EventProbeTimeout, EventUnparseable} {
		t.Run(kind.String(), func(t *testing.T) {
			ev := late
			ev.Kind = kind
			next, effs, err := f.Step(s, ev, t0.Add(time.Hour))
			require.NoError(t, err)
			assert.Empty(t, effs, "never applied")
			assert.Equal(t, StatusActive, next.Status)
			assert.Equal(t, s.Stale+1, next.Stale, "counted")
		})
	}

	// The previous worker (whose report moved the item last) without an
	// assignment id is stale too, not a duplicate to re-ACK.
	prev := reportEv(s, 3, Pass, "90", "")
	prev.Worker, prev.Assignment = s.Last.Worker, ""
	next, effs := mustStep(t, f, s, prev, t0)
	assert.Empty(t, effs)
	assert.Equal(t, s.Stale+1, next.Stale)
	assert.Zero(t, next.Duplicates)
}
