package worker

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/mutant"
)

// Errors of the Dispatcher, matched with errors.Is.
var (
	ErrStopped    = errors.New("worker: dispatcher stopped")
	ErrItemActive = errors.New("worker: item already queued or assigned")
	// ErrUnknownItem: Forget of an item the Dispatcher does not hold.
	ErrUnknownItem    = errors.New("worker: no such item")
	ErrWorkerExists   = errors.New("worker: worker already in the pool")
	ErrPoolFull       = errors.New("worker: pool already has MaxWorkers workers")
	ErrNoTransport    = errors.New("worker: neither Transport nor Agent configured")
	ErrInvalidMessage = errors.New("worker: invalid message")
)

// Stats are the Dispatcher's counters since it was created.
type Stats struct {
	Submitted, Assigned, Completed, Requeued, Parked uint64
	Escalations, Kills, Crashes, Stalls, Rejections  uint64
	Heartbeats, Progress                             uint64
	// Probes counts probes sent to silent workers, ProbesAnswered those
	// answered in time; Closed counts crashed items found closed.
	Probes, ProbesAnswered, Closed uint64
	// Forgotten counts parked items the host had forgotten (Forget).
	Forgotten uint64
	// RateLimited counts assignments whose agent was rate-limited (not
	// crashes); NeedsPerson those escalated for a person; SlowExtensions
	// the extensions granted to slow workers with evidence of work.
	RateLimited, NeedsPerson, SlowExtensions uint64
	// Stale, Duplicate and Invalid count messages ignored by fencing.
	Stale, Duplicate, Invalid uint64
	// Usage is the total reported by agents.
	Usage Usage
	// Halted: the dispatcher budget is spent; nothing more is assigned.
	Halted bool
}

func (c *core) stale(m Message, kind EventKind, now time.Time) Disposition {
	d := Stale
	if kind == EventDuplicate {
		c.stats.Duplicate++
		d = Duplicate
	} else {
		c.stats.Stale++
	}
	c.emit(Event{Kind: kind, At: now, Worker: m.Worker, Assignment: m.Assignment, Message: m.Kind})
	return d
}

func (c *core) invalid(m Message, err error, now time.Time) (Disposition, error) {
	c.stats.Invalid++
	c.emit(Event{Kind: EventInvalid, At: now, Worker: m.Worker, Assignment: m.Assignment, Message: m.Kind, Err: err})
	return Invalid, err
}

func (c *core) progress(w *workerSlot, reason string, now time.Time) {
	w.progressAt = now
	w.gathering = false // progress settles the question evidence was to answer
	w.lastSeen = now
	c.stats.Progress++
	c.out = append(c.out, effect{kind: effProgress, assignment: w.assignment})
	c.emit(Event{Kind: EventProgress, At: now, Worker: w.id, Assignment: w.assignment, Item: w.item.item.ID, Reason: reason})
}

// deliver applies one worker message, fenced by its assignment id.
func (c *core) deliver(m Message, now time.Time) (Disposition, error) {
	w := c.byAssignment[m.Assignment]
	if w == nil || w.id != m.Worker {
		// Ids are validated only here: a current assignment's ids were
		// issued by the core, so the hot path skips the check.
		for _, err := range []error{m.Worker.Validate(), m.Assignment.Validate()} {
			if err != nil {
				return c.invalid(m, fmt.Errorf("%w: %w", ErrInvalidMessage, err), now)
			}
		}
		if f, ok := c.finished.by[m.Assignment]; ok && f.worker == m.Worker && f.final == m.Kind {
			return c.stale(m, EventDuplicate, now), nil
		}
		return c.stale(m, EventStale, now), nil
	}
	if w.state == Reserved {
		c.move(w, WorkerStart, now) // the worker answered before the send was confirmed
	}
	if w.hp.Phase != health.Working {
		c.answered(w, m.Kind, now)
	}
	r := w.item
	switch m.Kind {
	case MsgHeartbeat:
		c.stats.Heartbeats++
		w.lastSeen = now
		if !m.LastOutput.IsZero() {
			w.lastOutput = m.LastOutput
		}
		c.recordUsage(w, r, m.Usage, now)
		if m.Commit != "" && m.Commit != w.lastCommit {
			prev := w.lastCommit
			w.lastCommit = m.Commit
			if prev != "" && w.state == Busy {
				c.progress(w, "new commit "+m.Commit, now)
				return Applied, nil
			}
		}
		if w.state == Busy && mutant.Active(mutant.StallIsProgress) {
			c.progress(w, "heartbeat", now)
			return Applied, nil
		}
		if w.state == Busy {
			c.out = append(c.out, effect{kind: effHeartbeat, assignment: w.assignment})
		}
		c.emit(Event{Kind: EventHeartbeat, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID})
	case MsgStatus:
		w.lastSeen = now
		if m.Status == StatusRunning && !w.sawRunning && w.state == Busy {
			w.sawRunning = true
			c.progress(w, "first running status", now)
		} else if w.state == Busy {
			c.out = append(c.out, effect{kind: effHeartbeat, assignment: w.assignment})
		}
	case MsgDone:
		if w.state != Busy {
			return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: m.Kind.String()}, now)
		}
		c.recordUsage(w, r, m.Usage, now)
		w.final = MsgDone
		c.complete(w, now)
	case MsgReadyForReview:
		if w.state == Reviewing {
			return c.stale(m, EventDuplicate, now), nil
		}
		if w.state != Busy {
			return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: m.Kind.String()}, now)
		}
		c.recordUsage(w, r, m.Usage, now)
		c.progress(w, "ready for review", now)
		// A reviewer's pace is not the worker's: the assignment's deadlines
		// stop while it waits for a verdict.
		c.out = append(c.out, effect{kind: effUntrack, assignment: w.assignment})
		w.final = MsgReadyForReview
		c.move(w, WorkerReadyForReview, now)
		c.moveItem(r, ItemReadyForReview)
		c.emit(Event{Kind: EventReviewRequested, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Attempt: r.attempt})
	case MsgQGResult:
		if w.state != Busy {
			return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: m.Kind.String()}, now)
		}
		c.recordUsage(w, r, m.Usage, now)
		c.progress(w, "quality gate result", now)
		w.pendingQG = m.QGOutput
		c.emit(Event{Kind: EventQGResult, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Reason: passFail(m.QGPassed)})
		if m.QGPassed {
			c.stuckQG.Reset(string(r.item.ID))
			break
		}
		if v := c.stuckQG.Record(string(r.item.ID), []byte(m.QGOutput)); v.Stuck {
			c.escalateStuckQG(w, r, v, now)
		}
	case MsgFailed:
		if w.state != Busy && w.state != Reviewing {
			return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: m.Kind.String()}, now)
		}
		c.recordUsage(w, r, m.Usage, now)
		w.final = MsgFailed
		c.emit(Event{Kind: EventFailed, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Reason: m.Reason})
		c.crash(w, CommandReset, "agent failed: "+m.Reason, now)
	case MsgRateLimited, MsgNeedsPerson:
		if w.state != Busy {
			return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: m.Kind.String()}, now)
		}
		c.recordUsage(w, r, m.Usage, now)
		w.final = m.Kind
		if m.Kind == MsgRateLimited {
			c.rateLimit(w, m, now)
		} else {
			c.needsPerson(w, m.Question, now)
		}
	default:
		return c.invalid(m, fmt.Errorf("%w: unknown kind %d", ErrInvalidMessage, m.Kind), now)
	}
	return Applied, nil
}

func passFail(ok bool) string {
	if ok {
		return "pass"
	}
	return "fail"
}

func (c *core) escalateStuckQG(w *workerSlot, r *itemRec, v health.QGVerdict, now time.Time) {
	// Seen, not Window: before the window fills, "3 of the last 10" would
	// claim outputs that never happened.
	reason := fmt.Sprintf("quality gate: %d of the last %d outputs identical", v.Repeats, v.Seen)
	e := c.escalate(StuckQG, w, r, reason, false, now)
	e.QGRepeats, e.QGWindow, e.QGStreak = v.Repeats, c.stuckQG.Config().Window, v.Streak
	c.release(w, CommandReset, "stuck quality gate", now)
	c.park(r, reason, now)
	c.tryAssign(now)
}

// crash ends an assignment whose worker died or whose agent failed: the
// item is requeued within the crash budget, parked and escalated beyond it.
func (c *core) crash(w *workerSlot, stop CommandKind, reason string, now time.Time) {
	r := w.item
	r.crashes++
	c.stats.Crashes++
	requeue := r.crashes <= c.cfg.crashBudget
	parked := ""
	if !requeue {
		parked = c.escalate(CrashLimit, w, r, fmt.Sprintf("%s (crash %d, budget %d)", reason, r.crashes, c.cfg.crashBudget), false, now).Reason
	}
	c.release(w, stop, reason, now)
	if requeue {
		c.requeue(r, now)
	} else {
		c.park(r, parked, now)
	}
	c.tryAssign(now)
}

// stall handles a worker that is alive but makes no progress:
// STUCK_WORKER, kill, and the item is reassignable within the stall budget.
func (c *core) stall(w *workerSlot, reason string, now time.Time) {
	r := w.item
	r.stalls++
	c.stats.Stalls++
	requeue := r.stalls <= c.cfg.stallBudget
	c.emit(Event{Kind: EventWorkerStalled, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Reason: reason})
	c.escalate(StuckWorker, w, r, reason, requeue, now)
	c.release(w, CommandKill, reason, now)
	if requeue {
		c.requeue(r, now)
	} else {
		c.park(r, "stalled: "+reason, now)
	}
	c.tryAssign(now)
}

// expired handles a deadline of a current assignment.
func (c *core) expired(id foreman.AssignmentID, kind health.DeadlineKind, now time.Time) {
	w := c.byAssignment[id]
	if w == nil || (w.state != Busy && w.state != Reserved) {
		return // the assignment ended meanwhile
	}
	switch kind {
	case health.Liveness:
		c.silent(w, now)
	case health.Progress:
		c.progressExpired(w, now)
	case health.Attempt:
		c.stall(w, "attempt deadline passed", now)
	}
}

// Verdict is a reviewer's decision on an assignment that is ready for review.
type Verdict struct {
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Approved   bool
	// Feedback is what the reviewer said; on a rejection it is carried into
	// every later attempt's MemoryContext.
	Feedback string
}

// review applies a verdict: approval completes the item; a rejection
// reassigns it with the feedback, or escalates past the limit.
func (c *core) review(v Verdict, now time.Time) (Disposition, error) {
	m := Message{Kind: MsgReadyForReview, Worker: v.Worker, Assignment: v.Assignment}
	w := c.byAssignment[v.Assignment]
	if w == nil || w.id != v.Worker {
		return c.stale(m, EventStale, now), nil
	}
	if w.state != Reviewing {
		return c.invalid(m, &TransitionError{Machine: "worker", From: w.state.String(), Event: "Review"}, now)
	}
	r := w.item
	if v.Approved {
		c.emit(Event{Kind: EventReviewApproved, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Attempt: r.attempt})
		c.complete(w, now)
		return Applied, nil
	}
	r.rejections++
	c.stats.Rejections++
	r.feedback = append(r.feedback, v.Feedback)
	c.emit(Event{Kind: EventReviewRejected, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Attempt: r.attempt, Reason: v.Feedback})
	switch {
	case r.rejections > c.cfg.maxReviewRejections:
		// Escalate, then free the worker (Idle, item, worktree and
		// pending QG output cleared, process reset) so that it takes new
		// work in this same assign cycle.
		e := c.escalate(ReviewLimit, w, r, fmt.Sprintf("rejected %d times (limit %d)", r.rejections, c.cfg.maxReviewRejections), false, now)
		c.release(w, CommandReset, "review limit", now)
		c.park(r, e.Reason, now)
	case c.cfg.mode == ModePooled && !r.overBudget && !c.halted && !c.stopping:
		// The same worker gets a new assignment carrying
		// every reviewer's feedback and the attempt counter; pending QG
		// output is cleared.
		c.finishAssignment(w)
		c.move(w, WorkerReassign, now)
		c.moveItem(r, ItemReassign)
		c.start(w, r, now)
	default:
		c.release(w, 0, "review rejected", now)
		c.requeue(r, now)
	}
	c.tryAssign(now)
	return Applied, nil
}

// shutdownActive ends every assignment still running at shutdown: its
// process is killed and its item goes back to the queue (never lost).
// Then every worker is told to stop.
func (c *core) shutdownActive(now time.Time) {
	c.stopping = true
	for _, w := range c.byAssignment {
		r := w.item
		c.release(w, CommandKill, "shutdown", now)
		c.requeue(r, now)
	}
	for _, w := range c.workers {
		c.move(w, WorkerShutdown, now)
		c.send(Command{Kind: CommandShutdown, Worker: w.id, Reason: "shutdown"})
		c.move(w, WorkerGone, now)
		c.removeWorker(w)
	}
}

// checkInvariants reports the first inconsistency in the pool: a worker
// busy without an item, an item held by two workers, an assignment index
// out of step, an item lost (every item submitted is queued, held by a
// worker, recovering, parked, completed or closed, and counted once). Tests
// call it after every step and while the stress tests run.
func (c *core) checkInvariants() error {
	holders := map[foreman.ItemID]foreman.WorkerID{}
	for id, w := range c.workers {
		switch w.state {
		case Reserved, Busy, Reviewing:
			if w.item == nil || w.assignment == "" {
				return fmt.Errorf("worker %s is %s without an item", id, w.state)
			}
			if c.byAssignment[w.assignment] != w {
				return fmt.Errorf("worker %s: assignment %s not indexed", id, w.assignment)
			}
			if other, ok := holders[w.item.item.ID]; ok {
				return fmt.Errorf("item %s held by %s and %s", w.item.item.ID, other, id)
			}
			holders[w.item.item.ID] = id
			if w.item.worker != w {
				return fmt.Errorf("item %s does not point back to worker %s", w.item.item.ID, id)
			}
		case Idle:
			if w.item != nil || w.assignment != "" || w.pendingQG != "" || w.worktree != "" {
				return fmt.Errorf("idle worker %s still holds state", id)
			}
		}
	}
	if len(holders) != len(c.byAssignment) {
		return fmt.Errorf("%d assignments indexed, %d held", len(c.byAssignment), len(holders))
	}
	queued := 0
	for id, r := range c.items {
		_, held := holders[id]
		if (r.state == Assigned || r.state == InReview) != held {
			return fmt.Errorf("item %s is %s but held=%v", id, r.state, held)
		}
		if (r.state == Queued) != (r.qIndex >= 0) {
			return fmt.Errorf("item %s is %s but queued=%v", id, r.state, r.qIndex >= 0)
		}
		if r.state == Queued {
			queued++
		}
	}
	if queued != c.queue.Len() {
		return fmt.Errorf("%d items queued, %d in the queue", queued, c.queue.Len())
	}
	// Completed, closed and forgotten items are gone; the rest are in
	// c.items.
	submitted := c.stats.Submitted - c.resubmitted
	if held := uint64(len(c.items)) + c.stats.Completed + c.stats.Closed + c.stats.Forgotten; held != submitted {
		return fmt.Errorf("items lost: %d submitted, %d held or finished (%d held, %d completed, %d closed, %d forgotten)",
			submitted, held, len(c.items), c.stats.Completed, c.stats.Closed, c.stats.Forgotten)
	}
	return nil
}
