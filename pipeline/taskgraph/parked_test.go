package taskgraph

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
)

// TestParkedTaskWaitsForAPerson plays a story paused by a merge conflict:
// the host parks it through Runtime.Update; the worker's late completion
// does not undo that, nothing respawns it and its dependent never
// unblocks, until a person releases it.
func TestParkedTaskWaitsForAPerson(t *testing.T) {
	ctx := context.Background()
	st := newMemory()
	sp := &recordingSpawner{}
	clk := foreman.NewFakeClock(t0)
	rt := newRuntime(t, st, sp, nil, clk)
	_, err := rt.Create(ctx, "s1", "", "custom", chain())
	require.NoError(t, err)
	_, err = rt.StepText(ctx, "s1", "start")
	require.NoError(t, err)
	_, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: "planner", Assignment: "A.1", Outcome: OutcomeCompleted})
	require.NoError(t, err)
	b, _ := stored(t, st, "s1").Graph.Task("B")

	res, err := rt.Update(ctx, "s1", TaskUpdate{Task: "B", To: Parked, Assignment: b.Assignment})
	require.NoError(t, err)
	assert.Equal(t, StepUpdated, res.Outcome)
	assert.Equal(t, "[coordinator] B is now parked", res.Effects[0].Text())
	assert.Equal(t, "task_parked", res.Effects[0].LogType())

	// The worker still reports success: parking wins, the worker is let go.
	res, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	assert.Empty(t, res.Reset, "a parked task is not reset to pending")
	assert.Empty(t, res.Spawned)
	assert.Contains(t, notes(res.Effects), NoteParked)
	assert.Contains(t, res.Effects[0].Text(), "B is parked, waiting for a person; its worker (executor) is released")
	s := stored(t, st, "s1")
	assert.Equal(t, Parked, status(t, s, "B"))
	assert.Equal(t, -1, s.workerIndexByTask("B"))

	// C completes; D waits on the parked B: a stall that names it.
	c, _ := s.Graph.Task("C")
	res, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: "fe-developer", Assignment: c.Assignment, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	assert.Equal(t, StepStalled, res.Outcome)
	assert.Equal(t, []BlockedTask{
		{Task: "B", Status: Parked},
		{Task: "D", Status: Pending, Blockers: []BlockerStatus{{Task: "B", Status: Parked}}},
	}, res.Blocked)
	stall := res.Effects[len(res.Effects)-1].Text()
	assert.Contains(t, stall, "D blocked by B (parked)")
	assert.Contains(t, stall, "B is parked: a person releases it (task update to pending), completes or cancels it.")

	// A resume neither resets nor respawns it.
	res, err = rt.StepText(ctx, "s1", "resume")
	require.NoError(t, err)
	assert.Equal(t, StepStalled, res.Outcome)
	assert.Empty(t, res.Reset)
	assert.Len(t, sp.calls, 3, "A, B, C only")

	report, err := rt.Status(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, []string{"B"}, report.Parked)
	assert.True(t, report.Stalled)
	golden(t, "custom_with_parked", report.Text())

	// A person releases it: it starts afresh under a new assignment, and
	// the parked assignment is stale from then on.
	res, err = rt.Update(ctx, "s1", TaskUpdate{Task: "B", To: Pending})
	require.NoError(t, err)
	assert.Equal(t, StepUpdated, res.Outcome)
	res, err = rt.StepText(ctx, "s1", "resume")
	require.NoError(t, err)
	assert.Equal(t, []string{"B"}, res.Spawned)
	res, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	assert.Equal(t, Stale, res.Disposition)
	b2, _ := stored(t, st, "s1").Graph.Task("B")
	assert.NotEqual(t, b.Assignment, b2.Assignment)
	for _, task := range []string{"B", "D"} {
		tk, _ := stored(t, st, "s1").Graph.Task(task)
		res, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: tk.Role, Assignment: tk.Assignment, Outcome: OutcomeCompleted})
		require.NoError(t, err)
	}
	assert.Equal(t, StepComplete, res.Outcome)
}

// TestParkUpdates covers every way into and out of Parked through
// Core.Update, and the fencing of a park.
func TestParkUpdates(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	a, _ := s.Graph.Task("A")

	t.Run("stale park is ignored", func(t *testing.T) {
		n, res, err := c.Update(s, TaskUpdate{Task: "A", To: Parked, Assignment: "A.99"})
		require.NoError(t, err)
		assert.Equal(t, Stale, res.Disposition)
		assert.Equal(t, InProgress, status(t, n, "A"))
		assert.Equal(t, int64(1), n.Counters.Stale)
	})
	t.Run("a person parks a pending task, twice", func(t *testing.T) {
		n, _, err := c.Update(s, TaskUpdate{Task: "D", To: Parked})
		require.NoError(t, err)
		assert.Equal(t, Parked, status(t, n, "D"))
		_, res, err := c.Update(n, TaskUpdate{Task: "D", To: Parked})
		require.NoError(t, err)
		assert.Equal(t, Duplicate, res.Disposition)
	})
	t.Run("parked then completed by a person with the assignment", func(t *testing.T) {
		n, _, err := c.Update(s, TaskUpdate{Task: "A", To: Parked, Assignment: a.Assignment})
		require.NoError(t, err)
		n, _, err = c.Update(n, TaskUpdate{Task: "A", To: Completed, Assignment: a.Assignment})
		require.NoError(t, err)
		assert.Equal(t, Completed, status(t, n, "A"))
		n, res := handle(t, c, n, WakeUp{Handler: HandleCallback, Role: "planner", Assignment: a.Assignment})
		assert.Equal(t, []string{"B", "C"}, res.Spawned)
		assert.Empty(t, res.Violations)
		_ = n
	})
	t.Run("parked then cancelled", func(t *testing.T) {
		n, _, err := c.Update(s, TaskUpdate{Task: "A", To: Parked, Assignment: a.Assignment})
		require.NoError(t, err)
		n, _, err = c.Update(n, TaskUpdate{Task: "A", To: Cancelled})
		require.NoError(t, err)
		assert.Equal(t, Cancelled, status(t, n, "A"))
	})
	t.Run("released while its worker is still listed", func(t *testing.T) {
		n, _, err := c.Update(s, TaskUpdate{Task: "A", To: Parked, Assignment: a.Assignment})
		require.NoError(t, err)
		require.Len(t, n.ActiveWorkers, 1, "parking changes only the status")
		n, res, err := c.Update(n, TaskUpdate{Task: "A", To: Pending})
		require.NoError(t, err)
		assert.Empty(t, res.Violations)
		assert.Empty(t, n.ActiveWorkers, "the parked worker is let go")
		tk, _ := n.Graph.Task("A")
		assert.Equal(t, Pending, tk.Status)
		assert.Empty(t, tk.Assignment)
		_, res = handle(t, c, n, WakeUp{})
		assert.Equal(t, []string{"A"}, res.Spawned)
	})
	t.Run("a failed task can be parked instead of retried", func(t *testing.T) {
		n, _, err := c.Update(s, TaskUpdate{Task: "A", To: Failed, Assignment: a.Assignment})
		require.NoError(t, err)
		n, _, err = c.Update(n, TaskUpdate{Task: "A", To: Parked, Assignment: a.Assignment})
		require.NoError(t, err)
		n, res := handle(t, c, n, Route("resume", nil))
		assert.Equal(t, Parked, status(t, n, "A"))
		assert.Empty(t, res.Reset)
		assert.Equal(t, StepStalled, res.Outcome)
	})
	t.Run("only parked tasks can be released", func(t *testing.T) {
		_, _, err := c.Update(s, TaskUpdate{Task: "D", To: Pending})
		var te *TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, TransitionError{Task: "D", From: Pending, Event: EventUnpark}, *te)
	})
}

// TestFailureIsRetriedButParkingIsNot contrasts the two: the seed's worker
// failure handling resets a failed task to pending and respawns it on the
// next resume; a parked task stays where it is.
func TestFailureIsRetriedButParkingIsNot(t *testing.T) {
	c := NewCore(CoreConfig{})
	for _, to := range []Status{Failed, Parked} {
		t.Run(to.String(), func(t *testing.T) {
			s := customSession(t, c, spec("A", "planner"))
			s, _ = handle(t, c, s, WakeUp{})
			a, _ := s.Graph.Task("A")
			s, _, err := c.Update(s, TaskUpdate{Task: "A", To: to, Assignment: a.Assignment})
			require.NoError(t, err)
			s, _ = handle(t, c, s, Route("resume", nil))
			if to == Failed {
				assert.Equal(t, InProgress, status(t, s, "A"), "reset and respawned")
				return
			}
			assert.Equal(t, Parked, status(t, s, "A"))
			assert.Empty(t, s.ActiveWorkers)
			assert.NotEqual(t, SessionCompleted, s.Status, "a parked task keeps the pipeline open")
		})
	}
}
