package worker

import (
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// absorb takes the core's effects after a call. Deadline effects are cheap
// and applied at once, under the lock, so that a deadline never runs for an
// assignment the core already ended; the others are queued in order for
// unlockAndDrain. Called with d.mu held.
//
// Effects are large (an Event, a Command): when nothing is queued yet,
// the core's slice itself becomes the queue and the core gets the queue's
// empty one, instead of every effect being copied across (the deadline
// effects applied stay in it, marked effApplied, which execute passes
// over).
func (d *Dispatcher) absorb() {
	out := d.core.out
	queued := 0
	for i := range out {
		e := &out[i]
		switch e.kind {
		case effTrack:
			_ = d.deadlines.Add(e.assignment)
		case effUntrack:
			d.deadlines.Remove(e.assignment)
			d.probes.Remove(e.assignment)
		case effArmProbe:
			_ = d.probes.Add(e.assignment)
		case effCancelProbe:
			d.probes.Remove(e.assignment)
		case effHeartbeat:
			_ = d.deadlines.Heartbeat(e.assignment)
		case effProgress:
			_ = d.deadlines.Progress(e.assignment)
		case effExtendProgress:
			_ = d.deadlines.ExtendProgress(e.assignment, e.delay)
		case effRetryAfter:
			d.armRetry(e.item, e.token, e.delay)
		default:
			queued++
			continue
		}
		e.kind = effApplied
	}
	switch {
	case queued == 0:
		clear(out)
		d.core.out = out[:0]
	case len(d.pending) == 0:
		d.pending, d.core.out = out, d.pending[:0]
	default:
		for i := range out {
			if out[i].kind != effApplied {
				d.pending = append(d.pending, out[i])
			}
		}
		clear(out)
		d.core.out = out[:0]
	}
	if d.core.stopping && !d.idleSent && len(d.core.byAssignment) == 0 {
		d.idleSent = true
		close(d.idle)
	}
}

// unlockAndDrain absorbs the core's effects, releases d.mu and carries out
// the queued effects in the order they were produced. Only one goroutine
// drains at a time; a call that finds another draining leaves its effects
// to it. So effects keep their order, and a Transport or Escalator that
// calls back into the Dispatcher does not deadlock.
func (d *Dispatcher) unlockAndDrain() {
	d.absorb()
	if d.draining || len(d.pending) == 0 {
		d.mu.Unlock()
		return
	}
	d.draining = true
	for len(d.pending) > 0 {
		// Three slices go round (the core's, the queue and this spare),
		// never two of them on one array: absorb may hand the queue's to
		// the core while this batch runs.
		batch := d.pending
		d.pending, d.spare = d.spare[:0], nil
		d.mu.Unlock()
		for i := range batch {
			d.execute(&batch[i])
		}
		clear(batch)
		d.mu.Lock()
		d.spare = batch[:0]
	}
	d.draining = false
	d.mu.Unlock()
}

// execute carries out one effect, without d.mu held.
func (d *Dispatcher) execute(e *effect) {
	switch e.kind {
	case effEvent:
		d.cfg.OnEvent(e.ev)
	case effEscalate:
		if d.cfg.Escalator == nil {
			return
		}
		if err := d.cfg.Escalator.Escalate(d.base, *e.esc); err != nil {
			d.mu.Lock()
			d.core.emit(Event{Kind: EventEscalationFailed, At: d.cfg.Clock.Now(), Item: e.esc.Item,
				Worker: e.esc.Worker, Assignment: e.esc.Assignment, Escalation: e.esc, Err: err})
			d.absorb()
			d.mu.Unlock()
		}
	case effGatherEvidence:
		ev, err := d.evidence.Evidence(d.base, e.worker, e.assignment, e.since)
		d.mu.Lock()
		d.core.evidenceGathered(e.assignment, ev, err, d.cfg.Clock.Now())
		d.absorb()
		d.mu.Unlock()
	case effCheckItem:
		open, err := d.cfg.ItemChecker.ItemOpen(d.base, e.item)
		d.mu.Lock()
		d.core.itemChecked(e.item, e.assignment, open, err, d.cfg.Clock.Now())
		d.absorb()
		d.mu.Unlock()
	case effSend:
		err := d.transport.Send(d.base, e.cmd)
		d.mu.Lock()
		now := d.cfg.Clock.Now()
		switch {
		case e.cmd.Kind == CommandProbe:
			d.core.probeSent(e.cmd, err, now)
		case err != nil:
			d.core.sendFailed(e.cmd, err, now)
		case e.cmd.Kind == CommandAssign:
			d.core.sent(e.cmd.Assignment, now)
		}
		if d.core.cfg.hooked {
			d.core.emit(Event{Kind: EventCommandSent, At: now, Worker: e.cmd.Worker, Assignment: e.cmd.Assignment,
				Command: e.cmd.Kind, Reason: e.cmd.Reason, Err: err})
		}
		d.absorb()
		d.mu.Unlock()
	}
}

// onExpiry receives the deadlines' expiries.
func (d *Dispatcher) onExpiry(x health.Expiry) {
	d.mu.Lock()
	d.core.expired(x.Subject, x.Kind, x.At)
	d.unlockAndDrain()
}

// onProbeExpiry receives the probe timeouts.
func (d *Dispatcher) onProbeExpiry(x health.Expiry) {
	d.mu.Lock()
	d.core.probeTimedOut(x.Subject, x.At)
	d.unlockAndDrain()
}

// external reports a Runtime event through the one hook, in order with the
// Dispatcher's own.
func (d *Dispatcher) external(ev Event) {
	if d.cfg.OnEvent == nil {
		return
	}
	d.mu.Lock()
	d.core.emit(ev)
	d.unlockAndDrain()
}

// armRetry starts the backoff timer of a rate-limited item. Called with
// d.mu held; the timer's callback takes it.
func (d *Dispatcher) armRetry(item foreman.ItemID, token uint64, delay time.Duration) {
	if d.core.stopping {
		return
	}
	if old, ok := d.retries[item]; ok {
		old.timer.Stop()
	}
	d.retries[item] = retryTimer{token: token, timer: d.cfg.Clock.AfterFunc(delay, func() {
		d.mu.Lock()
		if cur, ok := d.retries[item]; ok && cur.token == token {
			delete(d.retries, item)
		}
		d.core.retryDue(item, token, d.cfg.Clock.Now())
		d.unlockAndDrain()
	})}
}

type retryTimer struct {
	token uint64
	timer foreman.Timer
}
