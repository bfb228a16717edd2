package taskgraph

import "fmt"

// handleCallback follows this tree:
//
//	Receive callback from [<role>]
//	  ├─ Find matching active worker by role (and assignment)
//	  ├─ Task status = completed?
//	  │   ├─ YES → remove from active_workers → update session
//	  │   │   ├─ Handle checkpoints
//	  │   │   └─ → handleSpawnNext
//	  │   └─ NO → progress message, do not advance → STOP
//	  └─ No matching worker found
//	      ├─ Scan all active workers for completed tasks
//	      ├─ Found completed → process each → handleSpawnNext
//	      └─ None completed → STOP
//
// Fencing comes first: a callback naming an assignment that is not an
// active worker's is a duplicate when that assignment completed its task
// (acknowledged again) and stale otherwise (ignored); both are counted.
// In the NO branch a task that is failed (or otherwise not running) gets
// worker failure handling (workerFailure) instead of a progress message.
func (st *step) handleCallback(w WakeUp) (*Session, Result, error) {
	s := st.s
	if w.Role == "" && w.Assignment == "" {
		return nil, Result{}, fmt.Errorf("%w: a callback needs a role or an assignment", ErrInvalidWakeUp)
	}
	if w.Outcome != OutcomeNone && w.Assignment == "" {
		return nil, Result{}, fmt.Errorf("%w: a callback reporting an outcome must carry its assignment", ErrInvalidWakeUp)
	}
	wi := -1
	if w.Assignment != "" {
		wi = s.workerIndexByAssignment(w.Assignment)
		if wi < 0 || (w.Role != "" && s.ActiveWorkers[wi].Role != w.Role) || (w.Task != "" && s.ActiveWorkers[wi].Task != w.Task) {
			return st.fenced(w)
		}
	} else {
		for i := range s.ActiveWorkers {
			if s.ActiveWorkers[i].Role != w.Role || (w.Task != "" && s.ActiveWorkers[i].Task != w.Task) {
				continue
			}
			if wi >= 0 { // two workers share the role: the role alone says nothing
				wi = -1
				break
			}
			wi = i
		}
	}
	if wi < 0 {
		st.report(Effect{Note: NoteNoWorker, Role: w.Role})
		if st.processCompleted() == 0 {
			st.res.Outcome = StepIgnored
			return st.finish(true)
		}
		st.handleSpawnNext()
		return st.finish(true)
	}
	worker := s.ActiveWorkers[wi]
	ti, ok := s.Graph.index[worker.Task]
	if !ok {
		st.workerFailure(wi) // a worker for no task: released, reported
		st.res.Outcome = StepIgnored
		return st.finish(true)
	}
	// A cancellation or a parking wins over whatever the worker reports.
	if w.Outcome != OutcomeNone && s.Graph.state[ti].Status != Cancelled && s.Graph.state[ti].Status != Parked {
		to, ev := Completed, EventComplete
		if w.Outcome == OutcomeFailed {
			to, ev = Failed, EventFail
		}
		if s.Graph.state[ti].Status != to {
			if err := st.graph().apply(ti, ev); err != nil {
				return nil, Result{}, err
			}
		}
	}
	switch s.Graph.state[ti].Status {
	case Completed:
		st.complete(wi)
		st.handleSpawnNext()
	case InProgress:
		st.report(Effect{Note: NoteProgress, Task: worker.Task, Role: worker.Role})
		st.res.Outcome = StepProgress
	default:
		st.workerFailure(wi)
		st.res.Outcome = StepWorkerReset
	}
	return st.finish(true)
}

// fenced answers a callback whose assignment is not an active worker's.
func (st *step) fenced(w WakeUp) (*Session, Result, error) {
	s := st.s
	e := Effect{Role: w.Role, Assignment: w.Assignment}
	if ti := s.taskIndexByAssignment(w.Assignment); ti >= 0 {
		t := s.Graph.task(ti)
		e.Task = t.Subject
		if t.Status == Completed && (w.Role == "" || w.Role == t.Role) && (w.Task == "" || w.Task == t.Subject) {
			s.Counters.Duplicate++
			st.res.Disposition, st.res.Outcome = Duplicate, StepIgnored
			e.Kind, e.Note = EffectAck, NoteDuplicate
			st.emit(e)
			return st.finish(true)
		}
	}
	s.Counters.Stale++
	st.res.Disposition, st.res.Outcome = Stale, StepIgnored
	e.Kind, e.Note = EffectLog, NoteStale
	st.emit(e)
	return st.finish(true)
}

// complete processes a worker whose task is completed: the worker leaves
// active_workers, and a checkpoint task pauses the session.
func (st *step) complete(wi int) {
	w := st.s.ActiveWorkers[wi]
	st.removeWorker(wi)
	st.res.Completed = append(st.res.Completed, w.Task)
	st.report(Effect{Note: NoteConfirmed, Task: w.Task, Role: w.Role})
	if cp, ok := st.c.checkpointFor(w.Task, st.s.Mode); ok {
		st.s.Status, st.s.Checkpoint = SessionPaused, w.Task
		st.checkpointHit = true
		st.report(Effect{Note: NoteCheckpoint, Task: w.Task, Details: &Details{Text: cp.Message}})
	}
}

// processCompleted handles every active worker whose task is completed and
// returns how many there were.
func (st *step) processCompleted() int {
	n := 0
	for i := 0; i < len(st.s.ActiveWorkers); {
		ti, ok := st.s.Graph.index[st.s.ActiveWorkers[i].Task]
		if ok && st.s.Graph.state[ti].Status == Completed {
			st.complete(i)
			n++
			continue
		}
		i++
	}
	return n
}

// workerFailure is the worker failure handling for a worker whose
// task is neither completed nor in progress: reset the task to pending,
// log an error, tell the person it is retried on the next resume. A
// cancelled or parked task is not a failure: its worker is released and
// the task stays as it is (a parked one waits for a person).
func (st *step) workerFailure(wi int) {
	w := st.s.ActiveWorkers[wi]
	st.removeWorker(wi)
	ti, ok := st.s.Graph.index[w.Task]
	if !ok {
		st.report(Effect{Note: NoteViolations, Task: w.Task, Details: &Details{Text: fmt.Sprintf("active worker %s (%s) names no task %s; released", w.Assignment, w.Role, w.Task)}})
		return
	}
	status := st.s.Graph.state[ti].Status
	switch status {
	case Cancelled:
		st.report(Effect{Note: NoteCancelled, Task: w.Task, Role: w.Role, Assignment: w.Assignment})
		return
	case Parked:
		st.report(Effect{Note: NoteParked, Task: w.Task, Role: w.Role, Assignment: w.Assignment})
		return
	}
	g := st.graph()
	if status != Pending {
		// The table says whether this status may be reset; failed and in
		// progress may.
		if err := g.apply(ti, EventReset); err != nil {
			st.report(Effect{Note: NoteViolations, Task: w.Task, Details: &Details{Text: err.Error()}})
			return
		}
	}
	g.setAssignment(ti, "")
	st.res.Reset = append(st.res.Reset, w.Task)
	st.emit(Effect{Kind: EffectLog, Note: NoteWorkerFailed, Task: w.Task, Role: w.Role, Assignment: w.Assignment, Status: status})
	st.report(Effect{Note: NoteWorkerFailed, Task: w.Task, Role: w.Role, Assignment: w.Assignment, Status: status})
}

// handleCheck is the read-only status report.
func (st *step) handleCheck() {
	r := st.c.Status(st.s, st.at)
	st.report(Effect{Note: NoteStatus, Details: &Details{Report: &r}})
	st.res.Outcome = StepReported
}

// handleResume follows this tree:
//
//	Load active_workers from session
//	  ├─ No active workers → handleSpawnNext
//	  └─ Has active workers → check each:
//	      ├─ status = completed → mark done, log
//	      ├─ status = in_progress → still running, log
//	      └─ other status → worker failure → reset to pending
//	      After processing:
//	        ├─ Some completed → handleSpawnNext
//	        ├─ All still running → report status → STOP
//	        └─ All failed → handleSpawnNext (retry)
//
// Resume is also a person's release of a checkpoint pause, and it resets
// in-progress tasks that have no active worker (orphans) to pending.
func (st *step) handleResume() {
	s := st.s
	if s.Status == SessionPaused {
		st.report(Effect{Note: NoteResumed, Task: s.Checkpoint})
		s.Status, s.Checkpoint = SessionActive, ""
	}
	for i := range s.Graph.state {
		if i == 0 && !s.hasOrphans() {
			break // the usual case: no orphan, no scan
		}
		if s.Graph.state[i].Status == InProgress && s.workerIndexByTask(s.Graph.specs[i].Subject) < 0 {
			g := st.graph()
			_ = g.apply(i, EventReset) // in progress → pending is in the table
			g.setAssignment(i, "")
			st.res.Reset = append(st.res.Reset, g.specs[i].Subject)
			st.report(Effect{Note: NoteOrphanReset, Task: g.specs[i].Subject})
		}
	}
	if len(s.ActiveWorkers) == 0 {
		st.handleSpawnNext()
		return
	}
	var done, running int
	for i := 0; i < len(s.ActiveWorkers); {
		w := s.ActiveWorkers[i]
		status := Failed // a worker for no task is released like a failed one
		if ti, ok := s.Graph.index[w.Task]; ok {
			status = s.Graph.state[ti].Status
		}
		switch status {
		case Completed:
			st.complete(i)
			done++
			continue
		case InProgress:
			st.report(Effect{Note: NoteStillRunning, Task: w.Task, Role: w.Role})
			running++
			i++
		default:
			st.workerFailure(i)
		}
	}
	switch {
	case done > 0:
		st.handleSpawnNext()
	case running > 0:
		st.report(Effect{Note: NoteAllRunning, Count: running})
		st.res.Outcome = StepAllRunning
	default:
		st.handleSpawnNext()
	}
}

// handleSpawnNext follows this tree:
//
//	readySubjects: pending + all blockedBy completed
//	  ├─ NONE + work in progress → report waiting → STOP
//	  ├─ NONE + nothing in progress → PIPELINE_COMPLETE
//	  └─ HAS ready tasks → for each: → in_progress, log task_unblocked,
//	     spawn worker, add to active_workers; update session → STOP
//
// A parked task is never spawned and never unblocks its dependents; a
// pipeline with one is not complete. It spawns every ready task, or as many as CoreConfig.MaxActive allows
// (the others stay pending and are named in the waiting or summary
// report). "Nothing ready, nothing running" is
// PIPELINE_COMPLETE only when the pipeline is complete (no task pending or
// failed, every expected task created); otherwise it is a stall, reported
// with each blocked task and why. A paused session spawns nothing. It
// reports whether the session changed.
func (st *step) handleSpawnNext() bool {
	s := st.s
	if s.Status == SessionPaused {
		if !st.checkpointHit {
			st.report(Effect{Note: NotePaused, Task: s.Checkpoint})
		}
		st.res.Outcome = StepPaused
		return st.checkpointHit
	}
	g := s.Graph
	inProgress, completed, total := g.counts[InProgress], g.counts[Completed], g.Len()
	// The limit: at most MaxActive in progress; the rest wait, pending.
	slots := g.nReady
	var held *Details
	if limit := st.c.maxActive; limit > 0 && g.nReady > max(limit-inProgress, 0) {
		slots = max(limit-inProgress, 0)
		firstHeld := g.firstReady(slots + MaxHeldListed)[slots:]
		held = &Details{MaxActive: limit, More: g.nReady - slots - len(firstHeld)}
		for _, i := range firstHeld {
			held.Ready = append(held.Ready, g.specs[i].Subject)
		}
		st.res.Held, st.res.HeldCount = held.Ready, g.nReady-slots
	}
	if slots == 0 {
		if inProgress > 0 {
			st.report(Effect{Note: NoteWaiting, Tasks: s.inProgressSubjects(), Details: held})
			st.res.Outcome = StepWaiting
			return false
		}
		missing := st.c.missing(s)
		if len(missing) == 0 && g.Count(Pending) == 0 && g.Count(Failed) == 0 && g.Count(Parked) == 0 {
			wasComplete := s.Status == SessionCompleted
			if !wasComplete {
				s.Status, s.CompletedAt = SessionCompleted, st.at
				s.ActiveWorkers = nil
			}
			st.report(Effect{Note: NotePipelineComplete, Count: completed, Total: total})
			st.res.Outcome = StepComplete
			return !wasComplete
		}
		st.res.Blocked, st.res.Missing = g.Blocked(), missing
		st.report(Effect{Note: NoteStalled, Count: completed, Total: total, Details: &Details{Blocked: st.res.Blocked, Missing: missing}})
		st.res.Outcome = StepStalled
		return false
	}
	ready := g.firstReady(slots)
	g = st.graph()
	first := len(st.res.Spawned)
	for _, i32 := range ready {
		i := int(i32)
		if err := g.apply(i, EventStart); err != nil {
			panic(err) // ready means pending, and pending → in_progress is in the table
		}
		sp, ts := &g.specs[i], &g.state[i]
		s.Seq++
		g.setAssignment(i, assignmentFor(sp.Subject, s.Seq))
		ts.Attempts++
		st.addWorker(ActiveWorker{Task: sp.Subject, Role: sp.Role, Assignment: ts.Assignment, SpawnedAt: st.at})
		st.emit(Effect{Kind: EffectLog, Note: NoteUnblocked, Task: sp.Subject, Role: sp.Role, Assignment: ts.Assignment})
		st.emit(Effect{Kind: EffectSpawn, Task: sp.Subject, Role: sp.Role, Assignment: ts.Assignment})
		st.report(Effect{Note: NoteSpawned, Task: sp.Subject, Role: sp.Role, Assignment: ts.Assignment})
		st.res.Spawned = append(st.res.Spawned, sp.Subject)
	}
	spawned := st.res.Spawned[first:len(st.res.Spawned):len(st.res.Spawned)]
	st.report(Effect{Note: NoteSpawnSummary, Tasks: spawned, Count: completed, Total: total, Details: held})
	st.res.Outcome = StepSpawned
	return true
}
