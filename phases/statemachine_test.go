package phases_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// expectedTransitions is the state machine as specified, written out
// independently of the table in the code.
func expectedTransitions() []phases.Transition {
	q, l, b, s, v, f := phases.StateQueued, phases.StateLeased, phases.StateBuilding, phases.StateSnapshotting, phases.StateVerifying, phases.StateFeedback
	ok, fail, canceled := phases.StateSucceeded, phases.StateFailed, phases.StateCanceled
	rows := []phases.Transition{
		{From: q, Event: phases.EventWorkspaceAcquired, To: l},
		{From: l, Event: phases.EventBuildStarted, To: b},
		{From: b, Event: phases.EventBuildCompleted, To: s},
		{From: b, Event: phases.EventBuildFailed, To: fail},
		{From: s, Event: phases.EventSnapshotCompleted, To: v},
		{From: s, Event: phases.EventSnapshotFailed, To: fail},
		{From: s, Event: phases.EventNoChanges, To: f},
		{From: v, Event: phases.EventVerifyPassed, To: ok},
		{From: v, Event: phases.EventVerifyFailedRetryable, To: f},
		{From: v, Event: phases.EventVerifyFailedTerminal, To: fail},
		{From: f, Event: phases.EventFeedbackGenerated, To: b},
	}
	for _, st := range []phases.RunState{q, l, b, s, v, f} {
		rows = append(rows,
			phases.Transition{From: st, Event: phases.EventUserCanceled, To: canceled},
			phases.Transition{From: st, Event: phases.EventSystemError, To: fail},
			phases.Transition{From: st, Event: phases.EventLimitExceeded, To: fail},
		)
	}
	return rows
}

func TestStateMachine_EveryRow(t *testing.T) {
	for _, row := range expectedTransitions() {
		t.Run(string(row.From)+"+"+string(row.Event), func(t *testing.T) {
			got, err := phases.NextState(row.From, row.Event)
			require.NoError(t, err)
			assert.Equal(t, row.To, got)
		})
	}
	assert.ElementsMatch(t, expectedTransitions(), phases.Transitions(), "the table has exactly the specified rows")
}

func TestStateMachine_EveryInvalidPairIsATypedError(t *testing.T) {
	valid := map[phases.Transition]bool{}
	for _, row := range expectedTransitions() {
		valid[phases.Transition{From: row.From, Event: row.Event}] = true
	}
	invalid := 0
	for _, st := range phases.AllStates() {
		for _, ev := range phases.AllEvents() {
			if valid[phases.Transition{From: st, Event: ev}] {
				continue
			}
			invalid++
			got, err := phases.NextState(st, ev)
			assert.Empty(t, got)
			require.ErrorIs(t, err, phases.ErrInvalidTransition, "%s + %s", st, ev)
			var terr *phases.TransitionError
			require.True(t, errors.As(err, &terr))
			assert.Equal(t, st, terr.From)
			assert.Equal(t, ev, terr.Event)
		}
	}
	assert.Equal(t, len(phases.AllStates())*len(phases.AllEvents())-len(expectedTransitions()), invalid)
}

func TestStateMachine_TerminalStatesAcceptNothing(t *testing.T) {
	for _, st := range phases.AllStates() {
		accepts := 0
		for _, ev := range phases.AllEvents() {
			if _, err := phases.NextState(st, ev); err == nil {
				accepts++
			}
		}
		assert.Equal(t, st.Terminal(), accepts == 0, "%s", st)
	}
}

// Every non-terminal state reaches a terminal state, and every state is
// reachable from QUEUED.
func TestStateMachine_GraphEveryStateReachesATerminalState(t *testing.T) {
	next := map[phases.RunState][]phases.RunState{}
	for _, row := range phases.Transitions() {
		next[row.From] = append(next[row.From], row.To)
	}
	reach := func(from phases.RunState) map[phases.RunState]bool {
		seen := map[phases.RunState]bool{from: true}
		queue := []phases.RunState{from}
		for len(queue) > 0 {
			st := queue[0]
			queue = queue[1:]
			for _, to := range next[st] {
				if !seen[to] {
					seen[to] = true
					queue = append(queue, to)
				}
			}
		}
		return seen
	}
	for _, st := range phases.AllStates() {
		if st.Terminal() {
			continue
		}
		seen := reach(st)
		for _, terminal := range []phases.RunState{phases.StateSucceeded, phases.StateFailed, phases.StateCanceled} {
			assert.True(t, seen[terminal], "%s cannot reach %s", st, terminal)
		}
	}
	fromQueued := reach(phases.StateQueued)
	for _, st := range phases.AllStates() {
		assert.True(t, fromQueued[st], "%s is unreachable", st)
	}
	// FEEDBACK has a way out other than back to BUILDING, so a run that
	// never passes still ends.
	assert.Contains(t, next[phases.StateFeedback], phases.StateFailed)
}

func TestOutcomeForEvent(t *testing.T) {
	tests := []struct {
		event   phases.RunEvent
		outcome phases.Outcome
		reason  phases.Reason
		ok      bool
	}{
		{phases.EventVerifyPassed, phases.OutcomePassed, phases.ReasonVerified, true},
		{phases.EventBuildFailed, phases.OutcomeFailedBuild, phases.ReasonBuildFailed, true},
		{phases.EventSnapshotFailed, phases.OutcomeFailedSnapshot, phases.ReasonSnapshotFailed, true},
		{phases.EventVerifyFailedTerminal, phases.OutcomeFailedVerification, phases.ReasonVerificationError, true},
		{phases.EventLimitExceeded, phases.OutcomeFailedLimit, "", true},
		{phases.EventUserCanceled, phases.OutcomeCanceled, phases.ReasonCanceled, true},
		{phases.EventSystemError, phases.OutcomeFailedError, phases.ReasonSystemError, true},
		{phases.EventBuildCompleted, "", "", false},
		{phases.EventNoChanges, "", "", false},
	}
	for _, tt := range tests {
		outcome, reason, ok := phases.OutcomeForEvent(tt.event)
		assert.Equal(t, tt.outcome, outcome, tt.event)
		assert.Equal(t, tt.reason, reason, tt.event)
		assert.Equal(t, tt.ok, ok, tt.event)
	}
	// Every event into a terminal state has an outcome.
	for _, row := range phases.Transitions() {
		if row.To.Terminal() {
			_, _, ok := phases.OutcomeForEvent(row.Event)
			assert.True(t, ok, row.Event)
		}
	}
}
