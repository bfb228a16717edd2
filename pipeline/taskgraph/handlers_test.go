package taskgraph

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chain is a small custom pipeline: A → B, A → C, (B, C) → D.
func chain() []TaskSpec {
	return []TaskSpec{
		spec("A", "planner"),
		spec("B", "executor", "A"),
		spec("C", "fe-developer", "A"),
		spec("D", "reviewer", "B", "C"),
	}
}

func TestSpawnNextSpawnsEveryReadyTask(t *testing.T) {
	c := NewCore(CoreConfig{})
	s0 := customSession(t, c, chain()...)
	s1, res := handle(t, c, s0, WakeUp{})
	assert.Equal(t, StepSpawned, res.Outcome)
	assert.Equal(t, []string{"A"}, res.Spawned)
	assert.Equal(t, Pending, status(t, s0, "A"), "the input session is untouched")
	assert.Empty(t, s0.ActiveWorkers)

	s2, res := complete(t, c, s1, "A")
	assert.Equal(t, []string{"A"}, res.Completed)
	assert.Equal(t, []string{"B", "C"}, res.Spawned)
	assert.Equal(t, []string{"B", "C"}, spawns(res.Effects))
	assert.Equal(t, []Note{NoteConfirmed, NoteUnblocked, NoteNone, NoteSpawned, NoteUnblocked, NoteNone, NoteSpawned, NoteSpawnSummary}, notes(res.Effects))
	assert.Equal(t, InProgress, status(t, s2, "B"))
	assert.Equal(t, InProgress, status(t, s2, "C"))
	require.Len(t, s2.ActiveWorkers, 2)
	b, _ := s2.Graph.Task("B")
	assert.Equal(t, ActiveWorker{Task: "B", Role: "executor", Assignment: b.Assignment, SpawnedAt: t0}, s2.ActiveWorkers[0])
	assert.NotEqual(t, s2.ActiveWorkers[0].Assignment, s2.ActiveWorkers[1].Assignment)
	assert.Equal(t, res.Effects, s2.Pending[len(s2.Pending)-len(res.Effects):], "effects are recorded as pending")
	assert.Len(t, s1.ActiveWorkers, 1, "s1 untouched")
}

func TestSpawnNextWaitingCompleteAndStall(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})

	waiting, res := handle(t, c, s, WakeUp{})
	assert.Equal(t, StepWaiting, res.Outcome)
	assert.False(t, res.Changed)
	assert.Same(t, s, waiting)
	assert.Equal(t, []string{"A"}, res.Effects[0].Tasks)
	assert.Contains(t, res.Effects[0].Text(), "Waiting for: A")

	for _, task := range []string{"A", "B", "C", "D"} {
		s, _ = complete(t, c, s, task)
	}
	assert.Equal(t, SessionCompleted, s.Status, "the last completion's spawn-next detects completion")
	assert.Equal(t, t0, s.CompletedAt)
	again, res := handle(t, c, s, WakeUp{})
	assert.Equal(t, StepComplete, res.Outcome)
	assert.False(t, res.Changed, "a completed session stays as it is")
	assert.Same(t, s, again)
	assert.Contains(t, res.Effects[0].Text(), "PIPELINE_COMPLETE")
}

func TestStallWithFailedOrCancelledBlocker(t *testing.T) {
	c := NewCore(CoreConfig{})
	for _, blocker := range []Status{Failed, Cancelled} {
		t.Run(blocker.String(), func(t *testing.T) {
			s := customSession(t, c, chain()...)
			s, _ = handle(t, c, s, WakeUp{})
			s, _ = complete(t, c, s, "A")
			b, _ := s.Graph.Task("B")
			// B ends failed or cancelled; its worker is processed away.
			s, _, err := c.Update(s, TaskUpdate{Task: "B", To: blocker, Assignment: b.Assignment})
			require.NoError(t, err)
			s, _ = handle(t, c, s, WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment})
			s, res := complete(t, c, s, "C")
			if blocker == Failed {
				// The failed worker's task was reset to pending by its
				// callback, so B is ready again and is respawned.
				assert.Equal(t, []string{"B"}, res.Spawned)
				return
			}
			assert.Equal(t, StepStalled, res.Outcome)
			assert.Equal(t, []BlockedTask{{Task: "D", Status: Pending, Blockers: []BlockerStatus{{Task: "B", Status: Cancelled}}}}, res.Blocked)
			assert.NotEqual(t, SessionCompleted, s.Status)
			text := res.Effects[len(res.Effects)-1].Text()
			assert.Contains(t, text, "Pipeline stalled")
			assert.Contains(t, text, "D blocked by B (cancelled)")
		})
	}
}

func TestFailedBlockerNeverUnblocksWhileFailed(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, spec("A", "planner"), spec("B", "tester", "A"))
	s, _ = handle(t, c, s, WakeUp{})
	a, _ := s.Graph.Task("A")
	s, _, err := c.Update(s, TaskUpdate{Task: "A", To: Failed, Assignment: a.Assignment})
	require.NoError(t, err)
	_, res := handle(t, c, s, WakeUp{})
	assert.Empty(t, res.Spawned, "a failed blocker does not unblock B")
	assert.Equal(t, StepStalled, res.Outcome, "nothing ready, nothing in progress")
	assert.Equal(t, []BlockedTask{{Task: "A", Status: Failed}, {Task: "B", Status: Pending, Blockers: []BlockerStatus{{Task: "A", Status: Failed}}}}, res.Blocked)
	s, res = handle(t, c, s, WakeUp{Handler: HandleResume})
	assert.Equal(t, []string{"A"}, res.Reset)
	assert.Equal(t, []string{"A"}, res.Spawned, "resume retries it")
	assert.Equal(t, Pending, status(t, s, "B"))
}

func TestStallOnMissingTasks(t *testing.T) {
	c := NewCore(CoreConfig{})
	specs, _ := PipelineTasks(ModeImplOnly)
	s, err := c.NewSession("s1", ModeImplOnly, specs[:2], t0)
	require.NoError(t, err)
	s, _ = handle(t, c, s, WakeUp{})
	s, _ = complete(t, c, s, "PLAN-001")
	_, res := complete(t, c, s, "IMPL-001")
	assert.Equal(t, StepStalled, res.Outcome, "TEST-001 and REVIEW-001 were never created")
	assert.Equal(t, []string{"TEST-001", "REVIEW-001"}, res.Missing)
	assert.Contains(t, res.Effects[len(res.Effects)-1].Text(), "missing tasks: TEST-001, REVIEW-001")
	assert.Equal(t, CheckCompleteness, c.Validate(s)[0].Check)
}

func TestCallbackPaths(t *testing.T) {
	c := NewCore(CoreConfig{})
	base := customSession(t, c, chain()...)
	base, _ = handle(t, c, base, WakeUp{})
	base, _ = complete(t, c, base, "A") // B and C running
	b, _ := base.Graph.Task("B")
	cTask, _ := base.Graph.Task("C")

	t.Run("matched by role, task completed via update", func(t *testing.T) {
		s, _, err := c.Update(base, TaskUpdate{Task: "B", To: Completed, Assignment: b.Assignment})
		require.NoError(t, err)
		s, res := handle(t, c, s, WakeUp{Handler: HandleCallback, Role: "executor"})
		assert.Equal(t, []string{"B"}, res.Completed)
		assert.Equal(t, StepWaiting, res.Outcome, "D still waits for C")
		assert.Len(t, s.ActiveWorkers, 1)
	})
	t.Run("matched, still in progress: progress message, no advance", func(t *testing.T) {
		s, res := handle(t, c, base, WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment})
		assert.Equal(t, StepProgress, res.Outcome)
		assert.Equal(t, []Note{NoteProgress}, notes(res.Effects))
		assert.Len(t, s.ActiveWorkers, 2)
	})
	t.Run("matched, outcome failed: worker failure handling", func(t *testing.T) {
		s, res := handle(t, c, base, WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment, Outcome: OutcomeFailed})
		assert.Equal(t, StepWorkerReset, res.Outcome)
		assert.Equal(t, []string{"B"}, res.Reset)
		assert.Equal(t, Pending, status(t, s, "B"))
		tk, _ := s.Graph.Task("B")
		assert.Empty(t, tk.Assignment, "the old assignment is stale from now on")
		assert.Empty(t, spawns(res.Effects), "retried on the next resume, as the seed says")
		assert.Contains(t, res.Effects[len(res.Effects)-1].Text(), "reset to pending. Will retry on next 'resume'.")
		assert.Equal(t, "error", res.Effects[0].LogType())
	})
	t.Run("matched, task cancelled: worker released", func(t *testing.T) {
		s, _, err := c.Update(base, TaskUpdate{Task: "B", To: Cancelled})
		require.NoError(t, err)
		_, res := handle(t, c, s, WakeUp{Handler: HandleCallback, Assignment: b.Assignment, Outcome: OutcomeCompleted})
		assert.Equal(t, []Note{NoteCancelled}, notes(res.Effects), "a cancellation wins over a late completion")
		s, res = handle(t, c, s, WakeUp{Handler: HandleCallback, Assignment: b.Assignment})
		assert.Equal(t, []Note{NoteCancelled}, notes(res.Effects))
		assert.Equal(t, Cancelled, status(t, s, "B"))
		assert.Len(t, s.ActiveWorkers, 1)
	})
	t.Run("no matching worker, scan finds completed", func(t *testing.T) {
		s, _, err := c.Update(base, TaskUpdate{Task: "B", To: Completed, Assignment: b.Assignment})
		require.NoError(t, err)
		s, _, err = c.Update(s, TaskUpdate{Task: "C", To: Completed, Assignment: cTask.Assignment})
		require.NoError(t, err)
		s, res := handle(t, c, s, WakeUp{Handler: HandleCallback, Role: "analyst"})
		assert.Equal(t, []string{"B", "C"}, res.Completed)
		assert.Equal(t, []string{"D"}, res.Spawned)
		assert.Equal(t, NoteNoWorker, res.Effects[0].Note)
		assert.Len(t, s.ActiveWorkers, 1)
	})
	t.Run("no matching worker, none completed: stop", func(t *testing.T) {
		s, res := handle(t, c, base, WakeUp{Handler: HandleCallback, Role: "analyst"})
		assert.Equal(t, StepIgnored, res.Outcome)
		assert.Equal(t, []Note{NoteNoWorker}, notes(res.Effects))
		assert.Len(t, s.ActiveWorkers, 2)
	})
	t.Run("two workers share the role: the role alone matches none", func(t *testing.T) {
		cc := NewCore(CoreConfig{})
		s := customSession(t, cc, spec("X", "tester"), spec("Y", "tester"))
		s, _ = handle(t, cc, s, WakeUp{})
		_, res := handle(t, cc, s, WakeUp{Handler: HandleCallback, Role: "tester"})
		assert.Equal(t, NoteNoWorker, res.Effects[0].Note)
	})
	t.Run("an outcome the table forbids is a typed error", func(t *testing.T) {
		s, _, err := c.Update(base, TaskUpdate{Task: "B", To: Failed, Assignment: b.Assignment})
		require.NoError(t, err)
		_, _, err = c.Handle(s, WakeUp{Handler: HandleCallback, Assignment: b.Assignment, Outcome: OutcomeCompleted})
		var te *TransitionError
		require.ErrorAs(t, err, &te)
		assert.Equal(t, TransitionError{Task: "B", From: Failed, Event: EventComplete}, *te)
	})
	t.Run("invalid callbacks", func(t *testing.T) {
		_, _, err := c.Handle(base, WakeUp{Handler: HandleCallback})
		assert.ErrorIs(t, err, ErrInvalidWakeUp)
		_, _, err = c.Handle(base, WakeUp{Handler: HandleCallback, Role: "executor", Outcome: OutcomeCompleted})
		assert.ErrorIs(t, err, ErrInvalidWakeUp, "an outcome needs an assignment to be fenced")
		_, _, err = c.Handle(base, WakeUp{Handler: Handler(42)})
		assert.ErrorIs(t, err, ErrInvalidWakeUp)
		_, _, err = c.Handle(nil, WakeUp{})
		assert.ErrorIs(t, err, ErrInvalidWakeUp)
	})
}

func TestCallbackFencing(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	a, _ := s.Graph.Task("A")
	done, _ := complete(t, c, s, "A")

	t.Run("duplicate completion is re-acknowledged, not reprocessed", func(t *testing.T) {
		n, res := handle(t, c, done, WakeUp{Handler: HandleCallback, Role: "planner", Assignment: a.Assignment, Outcome: OutcomeCompleted})
		assert.Equal(t, Duplicate, res.Disposition)
		assert.Equal(t, []Note{NoteDuplicate}, notes(res.Effects))
		assert.Equal(t, EffectAck, res.Effects[0].Kind)
		assert.Empty(t, res.Spawned)
		assert.Equal(t, int64(1), n.Counters.Duplicate)
		assert.Equal(t, done.ActiveWorkers, n.ActiveWorkers)
	})
	t.Run("unknown assignment is stale", func(t *testing.T) {
		n, res := handle(t, c, done, WakeUp{Handler: HandleCallback, Role: "executor", Assignment: "B.99", Outcome: OutcomeCompleted})
		assert.Equal(t, Stale, res.Disposition)
		assert.Equal(t, int64(1), n.Counters.Stale)
		assert.Equal(t, InProgress, status(t, n, "B"), "never applied")
		assert.Equal(t, EffectLog, res.Effects[0].Kind)
	})
	t.Run("right assignment, wrong role is stale", func(t *testing.T) {
		b, _ := done.Graph.Task("B")
		n, res := handle(t, c, done, WakeUp{Handler: HandleCallback, Role: "tester", Assignment: b.Assignment, Outcome: OutcomeCompleted})
		assert.Equal(t, Stale, res.Disposition)
		assert.Equal(t, InProgress, status(t, n, "B"))
	})
	t.Run("right assignment, wrong task is stale", func(t *testing.T) {
		b, _ := done.Graph.Task("B")
		_, res := handle(t, c, done, WakeUp{Handler: HandleCallback, Assignment: b.Assignment, Task: "C", Outcome: OutcomeCompleted})
		assert.Equal(t, Stale, res.Disposition)
	})
	t.Run("old assignment after a reset is stale", func(t *testing.T) {
		b, _ := done.Graph.Task("B")
		n, _ := handle(t, c, done, WakeUp{Handler: HandleCallback, Assignment: b.Assignment, Outcome: OutcomeFailed})
		n, res := handle(t, c, n, WakeUp{Handler: HandleResume})
		require.Equal(t, StepAllRunning, res.Outcome, "as in the seed, a resume with C still running stops")
		n, res = handle(t, c, n, WakeUp{})
		require.Equal(t, []string{"B"}, res.Spawned)
		n, res = handle(t, c, n, WakeUp{Handler: HandleCallback, Role: "executor", Assignment: b.Assignment, Outcome: OutcomeCompleted})
		assert.Equal(t, Stale, res.Disposition, "the late DONE of the failed attempt cannot complete the new one")
		assert.Equal(t, InProgress, status(t, n, "B"))
		nb, _ := n.Graph.Task("B")
		assert.Equal(t, 2, nb.Attempts)
	})
	t.Run("assignment alone suffices", func(t *testing.T) {
		b, _ := done.Graph.Task("B")
		n, res := handle(t, c, done, WakeUp{Handler: HandleCallback, Assignment: b.Assignment, Outcome: OutcomeCompleted})
		assert.Equal(t, Applied, res.Disposition)
		assert.Equal(t, Completed, status(t, n, "B"))
	})
}

func TestResumePaths(t *testing.T) {
	c := NewCore(CoreConfig{})
	base := customSession(t, c, chain()...)
	base, _ = handle(t, c, base, WakeUp{})
	base, _ = complete(t, c, base, "A") // B and C running
	b, _ := base.Graph.Task("B")
	cTask, _ := base.Graph.Task("C")
	update := func(s *Session, task string, to Status, a AssignmentLike) *Session {
		n, _, err := c.Update(s, TaskUpdate{Task: task, To: to, Assignment: a.Assignment})
		require.NoError(t, err)
		return n
	}

	t.Run("no active workers: spawn next", func(t *testing.T) {
		s := customSession(t, c, chain()...)
		_, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, []string{"A"}, res.Spawned)
	})
	t.Run("all still running: report and stop", func(t *testing.T) {
		s, res := handle(t, c, base, WakeUp{Handler: HandleResume})
		assert.Equal(t, StepAllRunning, res.Outcome)
		assert.Equal(t, []Note{NoteStillRunning, NoteStillRunning, NoteAllRunning}, notes(res.Effects))
		assert.Len(t, s.ActiveWorkers, 2)
	})
	t.Run("some completed: process and spawn next", func(t *testing.T) {
		s := update(base, "B", Completed, b)
		s = update(s, "C", Completed, cTask)
		s, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, []string{"B", "C"}, res.Completed)
		assert.Equal(t, []string{"D"}, res.Spawned)
		assert.Len(t, s.ActiveWorkers, 1)
	})
	t.Run("one completed, one failed: reset and advance", func(t *testing.T) {
		s := update(base, "B", Completed, b)
		s = update(s, "C", Failed, cTask)
		s, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, []string{"B"}, res.Completed)
		assert.Equal(t, []string{"C"}, res.Reset)
		assert.Equal(t, []string{"C"}, res.Spawned, "the reset task is ready again and respawned")
		nc, _ := s.Graph.Task("C")
		assert.NotEqual(t, cTask.Assignment, nc.Assignment)
	})
	t.Run("all failed: reset and retry", func(t *testing.T) {
		s := update(base, "B", Failed, b)
		s = update(s, "C", Failed, cTask)
		s, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, []string{"B", "C"}, res.Reset)
		assert.Equal(t, []string{"B", "C"}, res.Spawned)
		assert.Len(t, s.ActiveWorkers, 2)
	})
	t.Run("one failed, one running: reset, then stop", func(t *testing.T) {
		s := update(base, "B", Failed, b)
		s, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, StepAllRunning, res.Outcome)
		assert.Equal(t, Pending, status(t, s, "B"))
		assert.Empty(t, res.Spawned)
	})
	t.Run("orphaned in-progress task is reset", func(t *testing.T) {
		s := base.clone()
		s.ActiveWorkers = s.ActiveWorkers[1:] // B loses its worker
		require.Equal(t, CheckNoOrphans, c.Validate(s)[0].Check)
		s, res := handle(t, c, s, WakeUp{Handler: HandleResume})
		assert.Equal(t, []string{"B"}, res.Reset)
		assert.Contains(t, notes(res.Effects), NoteOrphanReset)
		assert.Equal(t, StepAllRunning, res.Outcome)
		assert.Empty(t, c.Validate(s))
	})
}

// AssignmentLike is anything with an assignment (a Task).
type AssignmentLike = Task

func TestCheckpointPausesUntilResume(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := newSession(t, c, ModeFullLifecycle)
	s, _ = handle(t, c, s, WakeUp{})
	spec12, _ := PipelineTasks(ModeSpecOnly)
	var res Result
	for _, sp := range spec12 {
		s, res = complete(t, c, s, sp.Subject)
	}
	assert.Equal(t, StepPaused, res.Outcome)
	assert.Equal(t, SessionPaused, s.Status)
	assert.Equal(t, "DISCUSS-006", s.Checkpoint)
	assert.Empty(t, res.Spawned, "PLAN-001 waits for the review")
	assert.Equal(t, []Note{NoteConfirmed, NoteCheckpoint}, notes(res.Effects))
	assert.Contains(t, res.Effects[1].Text(), "SPEC PHASE COMPLETE")

	s, res = handle(t, c, s, WakeUp{})
	assert.Equal(t, StepPaused, res.Outcome)
	assert.Equal(t, []Note{NotePaused}, notes(res.Effects))
	assert.False(t, res.Changed)
	_, res = handle(t, c, s, WakeUp{Handler: HandleCheck})
	assert.Contains(t, res.Effects[0].Text(), "Paused at checkpoint DISCUSS-006")

	s, res = handle(t, c, s, WakeUp{Handler: HandleResume})
	assert.Equal(t, []string{"PLAN-001"}, res.Spawned)
	assert.Equal(t, SessionActive, s.Status)
	assert.Empty(t, s.Checkpoint)
	assert.Equal(t, NoteResumed, res.Effects[0].Note)
}

func TestCheckpointConfiguration(t *testing.T) {
	run := func(c *Core, mode Mode) Result {
		s := newSession(t, c, mode)
		s, _ = handle(t, c, s, WakeUp{})
		var res Result
		for _, sub := range []string{"RESEARCH-001", "DISCUSS-001", "DRAFT-001", "DISCUSS-002", "DRAFT-002", "DISCUSS-003", "DRAFT-003", "DISCUSS-004", "DRAFT-004", "DISCUSS-005", "QUALITY-001", "DISCUSS-006"} {
			s, res = complete(t, c, s, sub)
		}
		return res
	}
	assert.Equal(t, StepComplete, run(NewCore(CoreConfig{}), ModeSpecOnly).Outcome, "spec-only has no checkpoint")
	assert.Equal(t, StepPaused, run(NewCore(CoreConfig{}), ModeFullLifecycleFE).Outcome)
	assert.Equal(t, []string{"PLAN-001"}, run(NewCore(CoreConfig{NoCheckpoints: true}), ModeFullLifecycle).Spawned)
	custom := NewCore(CoreConfig{Checkpoints: []Checkpoint{{Task: "DRAFT-004", Message: "DRAFTS DONE"}}})
	s := newSession(t, custom, ModeSpecOnly)
	s, _ = handle(t, custom, s, WakeUp{})
	var res Result
	for _, sub := range []string{"RESEARCH-001", "DISCUSS-001", "DRAFT-001", "DISCUSS-002", "DRAFT-002", "DISCUSS-003", "DRAFT-003", "DISCUSS-004", "DRAFT-004"} {
		s, res = complete(t, custom, s, sub)
	}
	assert.Equal(t, StepPaused, res.Outcome)
	assert.Contains(t, res.Effects[1].Text(), "DRAFTS DONE")
}

func TestCheckIsReadOnly(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	n, res := handle(t, c, s, WakeUp{Handler: HandleCheck, At: t0.Add(90 * time.Minute)})
	assert.Same(t, s, n)
	assert.False(t, res.Changed)
	assert.Equal(t, StepReported, res.Outcome)
	require.Len(t, res.Effects, 1)
	assert.Equal(t, "1h30m", res.Effects[0].Details.Report.ActiveWorkers[0].ElapsedText)
	assert.Zero(t, res.Effects[0].Seq, "output only: not recorded")
}

func TestUpdate(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	a, _ := s.Graph.Task("A")

	n, res, err := c.Update(s, TaskUpdate{Task: "A", To: Completed, Assignment: a.Assignment})
	require.NoError(t, err)
	assert.Equal(t, StepUpdated, res.Outcome)
	assert.Equal(t, Completed, status(t, n, "A"))
	assert.Empty(t, spawns(res.Effects), "an update does not advance")
	assert.Equal(t, InProgress, status(t, s, "A"))

	_, res, err = c.Update(n, TaskUpdate{Task: "A", To: Completed, Assignment: a.Assignment})
	require.NoError(t, err)
	assert.Equal(t, Duplicate, res.Disposition)

	_, res, err = c.Update(s, TaskUpdate{Task: "A", To: Completed, Assignment: "A.77"})
	require.NoError(t, err)
	assert.Equal(t, Stale, res.Disposition)

	_, _, err = c.Update(n, TaskUpdate{Task: "A", To: Failed, Assignment: a.Assignment})
	var te *TransitionError
	require.ErrorAs(t, err, &te, "completed → failed is not in the table")
	assert.Equal(t, TransitionError{Task: "A", From: Completed, Event: EventFail}, *te)

	_, _, err = c.Update(n, TaskUpdate{Task: "A", To: Cancelled})
	assert.ErrorIs(t, err, ErrInvalidTransition)
	_, _, err = c.Update(s, TaskUpdate{Task: "Z", To: Completed, Assignment: "x"})
	assert.ErrorIs(t, err, ErrUnknownTask)
	_, _, err = c.Update(s, TaskUpdate{Task: "A", To: Completed})
	assert.ErrorIs(t, err, ErrInvalidUpdate)
	_, _, err = c.Update(s, TaskUpdate{Task: "A", To: InProgress})
	assert.ErrorIs(t, err, ErrInvalidUpdate)
	_, _, err = c.Update(s, TaskUpdate{Task: "A", To: Pending})
	assert.ErrorIs(t, err, ErrInvalidTransition, "only a parked task can be released to pending")
	_, _, err = c.Update(nil, TaskUpdate{})
	assert.ErrorIs(t, err, ErrInvalidUpdate)

	n, _, err = c.Update(s, TaskUpdate{Task: "D", To: Cancelled})
	require.NoError(t, err)
	assert.Equal(t, Cancelled, status(t, n, "D"))
	_, res, err = c.Update(n, TaskUpdate{Task: "D", To: Cancelled})
	require.NoError(t, err)
	assert.Equal(t, Duplicate, res.Disposition)
}

func TestAddTasksReopensACompletedSession(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, spec("A", "planner"))
	s, _ = handle(t, c, s, WakeUp{})
	s, _ = complete(t, c, s, "A")
	require.Equal(t, SessionCompleted, s.Status)
	n, err := c.AddTasks(s, spec("FIX-001", "executor", "A"))
	require.NoError(t, err)
	assert.Equal(t, SessionActive, n.Status)
	_, res := handle(t, c, n, WakeUp{})
	assert.Equal(t, []string{"FIX-001"}, res.Spawned)
	_, err = c.AddTasks(s, spec("FIX-002", "executor", "NOPE"))
	assert.ErrorIs(t, err, ErrUnknownBlocker)
}

func TestNewSessionErrors(t *testing.T) {
	c := NewCore(CoreConfig{})
	_, err := c.NewSession("bad id", ModeImplOnly, nil, t0)
	assert.Error(t, err)
	_, err = c.NewSession("s", "custom", nil, t0)
	assert.ErrorIs(t, err, ErrUnknownMode)
	_, err = c.NewSession("s", "custom", []TaskSpec{spec("A", "poet")}, t0)
	assert.ErrorIs(t, err, ErrUnknownRole)
	assert.Equal(t, DefaultRoles(), c.Roles())
}
