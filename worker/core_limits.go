package worker

import (
	"fmt"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
)

// Agents that stop for reasons that are not crashes: a provider's rate
// limit (retried after a backoff, not before the reset the provider named),
// a question or permission only a person can give (escalated, never
// answered here), and a worker that is slow rather than stuck (one
// extension when there is evidence of work).

// rateLimit ends w's assignment because its provider refused it for a rate
// limit. The item is not charged a crash: it backs off, at least until the
// reset the provider named, and is then queued again.
func (c *core) rateLimit(w *workerSlot, m Message, now time.Time) {
	r := w.item
	r.rateLimits++
	c.stats.RateLimited++
	delay := c.rateLimitDelay(r.rateLimits, m.ResetsAt, now)
	c.retrySeq++
	r.retryToken, r.retryAt = c.retrySeq, now.Add(delay)
	reason := m.Reason
	if reason == "" {
		reason = "rate limited"
	}
	c.emit(Event{Kind: EventRateLimited, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID,
		Attempt: r.attempt, Reason: reason, ResetsAt: m.ResetsAt, Delay: delay})
	c.release(w, 0, "rate limited", now)
	c.moveItem(r, ItemRateLimit)
	c.rateLimited++
	c.out = append(c.out, effect{kind: effRetryAfter, item: r.item.ID, delay: delay, token: r.retryToken})
	c.tryAssign(now)
}

// rateLimitDelay is the backoff before the n-th rate-limited attempt in a
// row is retried: RateLimitBackoff doubled per attempt up to
// RateLimitMaxBackoff, never before the named reset, plus up to
// RateLimitJitter so that items limited together do not retry together.
func (c *core) rateLimitDelay(n int, resetsAt, now time.Time) time.Duration {
	d := c.cfg.rateLimitBackoff
	for i := 1; i < n && d < c.cfg.rateLimitMaxBackoff; i++ {
		d *= 2
	}
	d = min(d, c.cfg.rateLimitMaxBackoff)
	if untilReset := resetsAt.Sub(now); !resetsAt.IsZero() && untilReset > d {
		d = untilReset
	}
	if c.cfg.rateLimitJitter > 0 && c.cfg.jitter != nil {
		d += time.Duration(c.cfg.jitter(int64(c.cfg.rateLimitJitter)))
	}
	return d
}

// retryDue queues a rate-limited item again once its backoff is over;
// token fences off a timer of an earlier backoff.
func (c *core) retryDue(item foreman.ItemID, token uint64, now time.Time) {
	r := c.items[item]
	if r == nil || r.state != RateLimited || r.retryToken != token {
		return
	}
	c.rateLimited--
	r.retryToken, r.retryAt = 0, time.Time{}
	c.requeue(r, now)
	c.tryAssign(now)
}

// RateLimitStatus says how many items are backing off after a rate limit
// and when the last of them is queued again.
type RateLimitStatus struct {
	Items int
	Until time.Time
}

func (c *core) rateLimitStatus() RateLimitStatus {
	s := RateLimitStatus{Items: c.rateLimited}
	if s.Items == 0 {
		return s
	}
	for _, r := range c.items {
		if r.state == RateLimited && r.retryAt.After(s.Until) {
			s.Until = r.retryAt
		}
	}
	return s
}

// needsPerson ends w's assignment because its agent waits for a person.
// The item is escalated with the question and parked; no crash is
// counted and nothing answers it.
func (c *core) needsPerson(w *workerSlot, question string, now time.Time) {
	r := w.item
	c.stats.NeedsPerson++
	if question == "" {
		question = "(the agent did not say what it is waiting for)"
	}
	c.emit(Event{Kind: EventWaitingForPerson, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID,
		Attempt: r.attempt, Reason: question})
	e := c.escalate(NeedsPerson, w, r, "the agent is waiting for a person: "+firstLine(question), false, now)
	e.Question = question
	// The agent may still sit at a prompt (a network transport's agent):
	// reset ends it, since no one here will answer.
	c.release(w, CommandReset, "waiting for a person", now)
	c.park(r, e.Reason, now)
	c.tryAssign(now)
}

func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i] + " …"
	}
	return s
}

// progressExpired handles a progress deadline: before the worker is
// treated as stuck, the shell is asked for evidence of work since its last
// progress (output, files changing, CPU time), unless its extensions are
// used up or there is nothing to ask.
func (c *core) progressExpired(w *workerSlot, now time.Time) {
	if w.gathering {
		return
	}
	if !c.cfg.gathersEvidence || w.extensions >= c.cfg.slowExtensions || w.state != Busy {
		c.stall(w, c.stuckReason(w), now)
		return
	}
	w.gathering = true
	c.out = append(c.out, effect{kind: effGatherEvidence, assignment: w.assignment, worker: w.id, since: w.progressAt})
}

func (c *core) stuckReason(w *workerSlot) string {
	reason := "no progress since " + w.progressAt.Format(time.RFC3339) + " though heartbeats continued"
	switch {
	case w.extensions > 0:
		reason += fmt.Sprintf(" (after %d extension(s) as a slow worker)", w.extensions)
	case c.cfg.gathersEvidence && c.cfg.slowExtensions > 0:
		reason += "; no evidence of work (output, files, CPU time)"
	}
	return reason
}

// evidenceGathered applies the evidence of work gathered for assignment
// id: with some, and an extension left, the worker is slow, not stuck,
// and its progress deadline is extended; without, it is stuck.
func (c *core) evidenceGathered(id foreman.AssignmentID, ev Evidence, err error, now time.Time) {
	w := c.byAssignment[id]
	if w == nil || !w.gathering {
		return // the assignment ended, or made progress, meanwhile
	}
	w.gathering = false
	if w.state != Busy {
		return
	}
	if err != nil || !c.shows(ev) {
		reason := c.stuckReason(w)
		if err != nil {
			reason += "; evidence could not be read: " + err.Error()
		}
		c.stall(w, reason, now)
		return
	}
	w.extensions++
	c.stats.SlowExtensions++
	c.out = append(c.out, effect{kind: effExtendProgress, assignment: id, delay: c.cfg.slowExtension})
	c.emit(Event{Kind: EventSlowWorker, At: now, Worker: w.id, Assignment: id, Item: w.item.item.ID,
		Attempt: w.item.attempt, Reason: ev.String(), Delay: c.cfg.slowExtension})
}
