package worker

import (
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// What the core does with an assignment once it has started one (core.go):
// it reached its worker (sent), or the worker could not be reached, and
// its end: the worker back to Idle or shut down and dropped, the item
// requeued, parked for a person, or completed.

// sent records that the assignment reached its worker.
func (c *core) sent(id foreman.AssignmentID, now time.Time) {
	if w := c.byAssignment[id]; w != nil && w.state == Reserved {
		c.move(w, WorkerStart, now)
	}
}

// sendFailed drops a worker that could not be reached. An assignment it
// held goes back to the queue without counting against the item: the item
// never got a chance.
func (c *core) sendFailed(cmd Command, err error, now time.Time) {
	w := c.workers[cmd.Worker]
	if w == nil || w.state == Stopped {
		return
	}
	c.emit(Event{Kind: EventWorkerLost, At: now, Worker: w.id, Assignment: cmd.Assignment, Command: cmd.Kind, Err: err})
	r := w.item
	if w.assignment != "" {
		c.finishAssignment(w)
	}
	c.move(w, WorkerGone, now)
	c.removeWorker(w)
	if r != nil {
		c.requeue(r, now)
	}
	c.tryAssign(now)
}

func (c *core) removeWorker(w *workerSlot) {
	if _, ok := c.workers[w.id]; ok {
		delete(c.workers, w.id)
		c.live--
	}
}

// finishAssignment forgets w's current assignment and everything held for it.
func (c *core) finishAssignment(w *workerSlot) {
	id := w.assignment
	c.out = append(c.out, effect{kind: effUntrack, assignment: id})
	delete(c.byAssignment, id)
	c.finished.add(id, w.id, w.final)
	w.final = 0
	if w.item != nil {
		w.item.worker = nil
	}
	w.assignment, w.item, w.worktree, w.pendingQG, w.lastCommit, w.sawRunning = "", nil, "", "", "", false
	w.hp = health.State{}
}

// release ends w's assignment. stop (CommandKill or CommandReset), when
// non-zero, is sent first so the agent's process group is terminated. A
// pooled worker goes back to Idle; a fresh one is shut down.
func (c *core) release(w *workerSlot, stop CommandKind, reason string, now time.Time) {
	id := w.assignment
	c.finishAssignment(w)
	if stop != 0 {
		c.stats.Kills++
		c.send(Command{Kind: stop, Worker: w.id, Assignment: id, Reason: reason})
	}
	if c.cfg.mode == ModePooled && !c.stopping {
		c.move(w, WorkerRelease, now)
		return
	}
	c.move(w, WorkerShutdown, now)
	c.send(Command{Kind: CommandShutdown, Worker: w.id, Assignment: id, Reason: reason})
	c.move(w, WorkerGone, now)
	c.removeWorker(w)
}

func (c *core) requeue(r *itemRec, now time.Time) {
	c.moveItem(r, ItemRequeue)
	c.queue.push(r)
	c.stats.Requeued++
	c.emit(Event{Kind: EventRequeued, At: now, Item: r.item.ID, Attempt: r.attempt})
}

// park sets r aside for a person, for reason (its escalation's). Its
// quality-gate history is dropped: a parked item leaves the worker, and
// submitting it again starts afresh.
func (c *core) park(r *itemRec, reason string, now time.Time) {
	c.queue.remove(r)
	c.moveItem(r, ItemPark)
	c.stuckQG.Reset(string(r.item.ID))
	c.stats.Parked++
	c.emit(Event{Kind: EventParked, At: now, Item: r.item.ID, Attempt: r.attempt, Reason: reason})
}

func (c *core) complete(w *workerSlot, now time.Time) {
	r := w.item
	id := w.assignment
	c.moveItem(r, ItemComplete)
	r.rateLimits = 0
	c.stats.Completed++
	c.stuckQG.Reset(string(r.item.ID))
	c.emit(Event{Kind: EventCompleted, At: now, Worker: w.id, Assignment: id, Item: r.item.ID, Attempt: r.attempt, Usage: r.usage})
	c.release(w, 0, "completed", now)
	delete(c.items, r.item.ID)
	c.tryAssign(now)
}
