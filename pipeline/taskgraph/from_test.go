package taskgraph

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
)

// TestUpdateFromGuardsTheStatus: an update with From applies only to a
// task in one of those statuses, so a host can cancel a task that has not
// started without cancelling one the coordinator started meanwhile.
func TestUpdateFromGuardsTheStatus(t *testing.T) {
	ctx := context.Background()
	st := newMemory()
	rt := newRuntime(t, st, &recordingSpawner{}, nil, foreman.NewFakeClock(t0))
	_, err := rt.Create(ctx, "s1", "", "custom", chain())
	require.NoError(t, err)
	_, err = rt.StepText(ctx, "s1", "start") // A starts; B waits for it
	require.NoError(t, err)
	a, _ := stored(t, st, "s1").Graph.Task("A")
	require.Equal(t, InProgress, a.Status)

	_, err = rt.Update(ctx, "s1", TaskUpdate{Task: "A", To: Cancelled, From: []Status{Pending}})
	var te *TransitionError
	require.True(t, errors.As(err, &te), "%v", err)
	assert.Equal(t, InProgress, te.From)
	assert.ErrorIs(t, err, ErrInvalidTransition)
	a, _ = stored(t, st, "s1").Graph.Task("A")
	assert.Equal(t, InProgress, a.Status, "the started task is left alone")

	_, err = rt.Update(ctx, "s1", TaskUpdate{Task: "B", To: Cancelled, From: []Status{Pending}})
	require.NoError(t, err)
	b, _ := stored(t, st, "s1").Graph.Task("B")
	assert.Equal(t, Cancelled, b.Status)
}
