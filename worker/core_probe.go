package worker

import (
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// The crash-detection protocol in the core. health.Step is the protocol
// (a pure transition table); the core holds one health.State per current
// assignment (workerSlot.hp) and, after a confirmed crash, one per
// recovering item (itemRec.recovery), feeds Step the events it sees, and
// turns Step's effects into its own: probe commands, probe timeouts and
// item checks for the shell to carry out, kills, requeues and escalations.
// A liveness expiry is therefore never a crash by itself: it makes the
// worker Suspicious and a probe goes out; any message of the assignment
// answers it; only an unanswered probe (its timeout, a failed send, or
// another silence while probing) confirms the crash.

// step applies ev to w's protocol state. Step refusing the pair is a bug
// in the core, not in its input, as with the worker table.
func (c *core) step(w *workerSlot, ev health.EventKind, now time.Time) (health.State, []health.Effect) {
	next, effects, err := health.Step(w.hp, health.Event{Kind: ev, At: now}, c.cfg.crashBudget)
	if err != nil {
		panic(fmt.Sprintf("worker core: %v (assignment %s)", err, w.assignment))
	}
	w.hp = next
	return next, effects
}

// silent handles a liveness expiry: no message from the assignment for
// LivenessTimeout.
func (c *core) silent(w *workerSlot, now time.Time) {
	c.emit(Event{Kind: EventWorkerSuspicious, At: now, Worker: w.id, Assignment: w.assignment, Item: w.item.item.ID,
		Reason: "no message since " + w.lastSeen.Format(time.RFC3339)})
	c.protocol(w, health.EventIdle, "no answer to the probe and still silent", now)
}

// protocol steps w's assignment and carries out the effects. reason
// explains a crash, should this event confirm one.
func (c *core) protocol(w *workerSlot, ev health.EventKind, reason string, now time.Time) {
	id := w.assignment
	next, effects := c.step(w, ev, now)
	for _, e := range effects {
		switch e {
		case health.EffectSendProbe:
			c.stats.Probes++
			c.send(Command{Kind: CommandProbe, Worker: w.id, Assignment: id,
				Reason: health.ProbeText(w.item.item.ID, w.item.item.Stage)})
		case health.EffectArmProbeTimeout:
			c.out = append(c.out, effect{kind: effArmProbe, assignment: id})
		case health.EffectCancelProbeTimeout:
			c.out = append(c.out, effect{kind: effCancelProbe, assignment: id})
		case health.EffectCheckItemOpen, health.EffectEscalate:
			c.crashConfirmed(w, next, reason, now)
			return
		}
	}
}

// answered clears suspicion: a message of the assignment arrived while it
// was suspicious or being probed.
func (c *core) answered(w *workerSlot, kind MessageKind, now time.Time) {
	c.stats.ProbesAnswered++
	c.emit(Event{Kind: EventProbeAnswered, At: now, Worker: w.id, Assignment: w.assignment, Item: w.item.item.ID, Message: kind})
	c.protocol(w, health.EventStatusReply, "", now)
}

// probeSent records whether the probe reached the worker.
func (c *core) probeSent(cmd Command, err error, now time.Time) {
	w := c.byAssignment[cmd.Assignment]
	if w == nil || w.hp.Phase != health.Suspicious {
		return // answered, or ended, before the send returned
	}
	if err != nil {
		c.emit(Event{Kind: EventWorkerLost, At: now, Worker: w.id, Assignment: w.assignment, Command: cmd.Kind, Err: err})
		c.protocol(w, health.EventProbeFailed, "probe could not be sent: "+err.Error(), now)
		return
	}
	c.protocol(w, health.EventProbeSent, "", now)
}

// probeTimedOut handles a probe left unanswered for ProbeTimeout.
func (c *core) probeTimedOut(id foreman.AssignmentID, now time.Time) {
	w := c.byAssignment[id]
	if w == nil || w.hp.Phase != health.Probing {
		return
	}
	c.protocol(w, health.EventProbeTimeout, "no answer to the probe within the probe timeout", now)
}

// crashConfirmed ends an assignment whose worker did not answer its probe:
// the process is killed and the worker freed. Beyond the crash budget the
// item is parked with CRASH_LIMIT; within it the item is recovering until
// it is known to be still open.
func (c *core) crashConfirmed(w *workerSlot, next health.State, reason string, now time.Time) {
	r := w.item
	id := w.assignment
	r.crashes = next.Crashes
	c.stats.Crashes++
	c.emit(Event{Kind: EventWorkerDead, At: now, Worker: w.id, Assignment: id, Item: r.item.ID, Reason: reason})
	if next.Phase == health.Paused {
		e := c.escalate(CrashLimit, w, r, fmt.Sprintf("worker fell silent: %s (crash %d, budget %d)", reason, r.crashes, c.cfg.crashBudget), false, now)
		c.release(w, CommandKill, reason, now)
		c.park(r, e.Reason, now)
		c.tryAssign(now)
		return
	}
	c.release(w, CommandKill, reason, now)
	c.moveItem(r, ItemRecover)
	r.recovery, r.checking = next, id
	if c.cfg.checksItems {
		c.out = append(c.out, effect{kind: effCheckItem, assignment: id, item: r.item.ID})
	} else {
		c.itemChecked(r.item.ID, id, true, nil, now)
	}
	c.tryAssign(now)
}

// itemChecked applies the answer to an item check made after the crash of
// assignment crashed: requeue an open item, drop a closed one, park one
// whose state could not be learnt.
func (c *core) itemChecked(item foreman.ItemID, crashed foreman.AssignmentID, open bool, err error, now time.Time) {
	r := c.items[item]
	if r == nil || r.state != Recovering || r.checking != crashed {
		return
	}
	ev := health.EventItemClosed
	switch {
	case err != nil:
		ev = health.EventItemCheckFailed
	case open:
		ev = health.EventItemOpen
	}
	next, effects, serr := health.Step(r.recovery, health.Event{Kind: ev, At: now}, c.cfg.crashBudget)
	if serr != nil {
		panic(fmt.Sprintf("worker core: %v (item %s)", serr, item))
	}
	r.recovery, r.checking = health.State{}, ""
	for _, e := range effects {
		switch e {
		case health.EffectResume:
			// Resuming here is requeueing: the next assignment starts with
			// the item's own context and the next Attempt.
			c.requeue(r, now)
		case health.EffectReportClosed:
			c.moveItem(r, ItemClose)
			c.stats.Closed++
			c.stuckQG.Reset(string(item))
			delete(c.items, item)
			c.emit(Event{Kind: EventItemClosed, At: now, Assignment: crashed, Item: item, Attempt: r.attempt,
				Reason: "the item was closed while its worker was down; it is not reassigned"})
		case health.EffectEscalate:
			e := c.escalate(ItemCheckFailed, nil, r, fmt.Sprintf("%s after a crash: %v", next.PauseReason, err), false, now)
			e.Assignment = crashed
			c.park(r, e.Reason, now)
		}
	}
	// A Resuming item's protocol ends here: its next assignment starts
	// afresh in Working, with the crash counted in r.crashes.
	c.tryAssign(now)
}
