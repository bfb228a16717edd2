package phases

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTransitionTable_HasNoEmptyRows(t *testing.T) {
	for i, row := range transitionTable() {
		assert.NotEmpty(t, row.From, "row %d", i)
		assert.NotEmpty(t, row.Event, "row %d", i)
		assert.NotEmpty(t, row.To, "row %d", i)
	}
}

func TestMachine_NoIterationIsBuiltTwice(t *testing.T) {
	m := newMachine()
	require.ErrorIs(t, m.startBuild(), ErrIterationRebuilt, "not BUILDING yet")
	for _, ev := range []RunEvent{EventWorkspaceAcquired, EventBuildStarted} {
		_, err := m.fire(ev)
		require.NoError(t, err)
	}
	require.Equal(t, 1, m.iteration)
	require.NoError(t, m.startBuild())
	assert.ErrorIs(t, m.startBuild(), ErrIterationRebuilt, "iteration 1 again")

	for _, ev := range []RunEvent{EventBuildCompleted, EventSnapshotCompleted, EventVerifyFailedRetryable, EventFeedbackGenerated} {
		_, err := m.fire(ev)
		require.NoError(t, err)
	}
	assert.Equal(t, 2, m.iteration)
	require.NoError(t, m.startBuild())
	assert.ErrorIs(t, m.startBuild(), ErrIterationRebuilt)
	assert.Equal(t, []RunState{StateQueued, StateLeased, StateBuilding, StateSnapshotting, StateVerifying, StateFeedback, StateBuilding}, m.visited)
}

func TestMachine_InvalidEventLeavesStateUnchanged(t *testing.T) {
	m := newMachine()
	_, err := m.fire(EventVerifyPassed)
	require.ErrorIs(t, err, ErrInvalidTransition)
	assert.Equal(t, StateQueued, m.state)
	assert.Equal(t, []RunState{StateQueued}, m.visited)
}
