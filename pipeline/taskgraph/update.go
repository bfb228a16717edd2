package taskgraph

import (
	"fmt"
	"slices"
)

// Task updates, apart from the wake-ups' handlers (handlers.go): Update
// and ApplyUpdate make the one status change a TaskUpdate asks for, fenced
// by the assignment, as a step of its own.

// Update applies a TaskUpdate: the one status change, fenced by the
// assignment, and nothing else (the coordinator acts on it at its next
// wake-up). Releasing a parked task (To: Pending) also
// drops its stale assignment and any worker still listed for it. An
// invalid (status, event) pair is a *TransitionError and the session is
// unchanged.
func (c *Core) Update(s *Session, u TaskUpdate) (*Session, Result, error) {
	if s == nil || s.Graph == nil {
		return nil, Result{}, fmt.Errorf("%w: no session", ErrInvalidUpdate)
	}
	var st step
	c.begin(&st, s, HandleUpdate, u.At)
	return st.update(u)
}

// ApplyUpdate is Update for a caller that owns s (see Apply): it changes
// s in place. On error s is unchanged.
func (c *Core) ApplyUpdate(s *Session, u TaskUpdate) (Result, error) {
	if s == nil || s.Graph == nil {
		return Result{}, fmt.Errorf("%w: no session", ErrInvalidUpdate)
	}
	var st step
	c.beginInPlace(&st, s, HandleUpdate, u.At)
	_, res, err := st.update(u)
	return res, err
}

func (st *step) update(u TaskUpdate) (*Session, Result, error) {
	s := st.old
	i, ok := s.Graph.index[u.Task]
	if !ok {
		return nil, Result{}, fmt.Errorf("%w: %q", ErrUnknownTask, u.Task)
	}
	t := s.Graph.task(i)
	var ev Event
	if len(u.From) > 0 && !slices.Contains(u.From, t.Status) {
		return nil, Result{}, &TransitionError{Task: u.Task, From: t.Status, Event: updateEvent(u.To)}
	}
	switch u.To {
	case Completed, Failed:
		if u.Assignment == "" {
			return nil, Result{}, fmt.Errorf("%w: marking %s %s needs its assignment", ErrInvalidUpdate, u.Task, u.To)
		}
		if u.Assignment != t.Assignment {
			st.s.Counters.Stale++
			st.res.Disposition, st.res.Outcome = Stale, StepIgnored
			st.emit(Effect{Kind: EffectLog, Note: NoteStale, Task: u.Task, Assignment: u.Assignment})
			return st.finish(true)
		}
		ev = EventComplete
		if u.To == Failed {
			ev = EventFail
		}
	case Cancelled:
		ev = EventCancel
	case Parked:
		// The host parking its own assignment is fenced; a person may
		// park a task without naming one.
		if u.Assignment != "" && u.Assignment != t.Assignment {
			st.s.Counters.Stale++
			st.res.Disposition, st.res.Outcome = Stale, StepIgnored
			st.emit(Effect{Kind: EffectLog, Note: NoteStale, Task: u.Task, Assignment: u.Assignment})
			return st.finish(true)
		}
		ev = EventPark
	case Pending:
		if t.Status != Parked {
			return nil, Result{}, &TransitionError{Task: u.Task, From: t.Status, Event: EventUnpark}
		}
		ev = EventUnpark
	default:
		return nil, Result{}, fmt.Errorf("%w: cannot set %s to %s", ErrInvalidUpdate, u.Task, u.To)
	}
	if t.Status == u.To {
		st.s.Counters.Duplicate++
		st.res.Disposition, st.res.Outcome = Duplicate, StepIgnored
		st.emit(Effect{Kind: EffectAck, Note: NoteDuplicate, Task: u.Task, Role: t.Role, Assignment: u.Assignment})
		return st.finish(true)
	}
	if err := st.graph().apply(i, ev); err != nil {
		return nil, Result{}, err
	}
	if ev == EventUnpark {
		// Released to start afresh: the parked assignment is stale from
		// now on, and a worker still listed for it is let go.
		st.s.Graph.setAssignment(i, "")
		if wi := st.s.workerIndexByTask(u.Task); wi >= 0 {
			st.removeWorker(wi)
		}
	}
	st.res.Outcome = StepUpdated
	st.emit(Effect{Kind: EffectLog, Note: NoteTaskUpdated, Task: u.Task, Role: t.Role, Assignment: t.Assignment, Status: u.To})
	return st.finish(true)
}

// updateEvent is the event a TaskUpdate to status to stands for.
func updateEvent(to Status) Event {
	switch to {
	case Completed:
		return EventComplete
	case Failed:
		return EventFail
	case Cancelled:
		return EventCancel
	case Parked:
		return EventPark
	}
	return EventUnpark
}
