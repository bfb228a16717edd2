package pgtransport

import (
	"time"

	"github.com/agentforeman/foreman/worker"
)

const (
	// promiseCooldowns is how many ReadCooldowns the promise to poll that
	// a write carries lasts (pollPromise; 50 ms by default): a busy
	// coordinator writes far more often, so its promise does not run out
	// while it is busy.
	promiseCooldowns = 10
	// marginCooldowns is how many ReadCooldowns longer than it promised
	// the coordinator polls, at least minMargin: for a host's round that
	// saw the promise in time and committed later (on a loaded machine, a
	// round can stall between the two).
	marginCooldowns = 20
	minMargin       = time.Second
	// maxWatched is the most assignments out for which the coordinator
	// promises to poll: each poll looks every one of them up.
	maxWatched = 1024
	// probesPerRound: nor does it promise while more are out than this
	// many times the hosts whose finished rows its recent reads delivered
	// each (about one round each): looking an id up costs the database a
	// microsecond or two, a notifying round a hundred or two more than
	// one that does not notify. So a coordinator whose runs finish
	// seldom, or whose hosts' rounds each finish many (few rounds for
	// many out), keeps the notifications.
	probesPerRound = 100
)

// watch records the assignments that cmds hand out and withdraw, and says
// whether their write promises to poll (ReadCooldown on, and no more
// than maxWatched assignments out); if so the promise starts now.
func (c *Coordinator) watch(cmds []worker.Command) (promise bool) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	for _, cmd := range cmds {
		switch {
		case cmd.Kind == worker.CommandAssign:
			c.outstanding[string(cmd.Assign.ID)] = string(cmd.Worker)
			c.slots[string(cmd.Worker)] = string(cmd.Assign.ID)
		case cmd.Kind == worker.CommandProbe:
		case cmd.Assignment != "":
			c.overLocked(string(cmd.Assignment))
		default: // a stop of the slot's assignment, whichever it is
			if id, ok := c.slots[string(cmd.Worker)]; ok {
				c.overLocked(id)
			}
		}
	}
	if n := float64(len(c.outstanding)); c.cfg.ReadCooldown <= 0 || n > maxWatched || n > probesPerRound*c.perRead {
		return false
	}
	c.extendLocked()
	return true
}

// promised extends the promise once a write that carried it returned: the
// database started the promise before that.
func (c *Coordinator) promised() {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	c.extendLocked()
}

func (c *Coordinator) extendLocked() {
	margin := max(marginCooldowns*c.cfg.ReadCooldown, minMargin)
	if until := c.clock.Now().Add(promiseCooldowns*c.cfg.ReadCooldown + margin); until.After(c.fastUntil) {
		c.fastUntil = until
	}
	if !c.owed {
		c.owed = true
		select { // a read loop waiting for a notification polls from now on
		case c.pollKick <- struct{}{}:
		default:
		}
	}
}

// over forgets an assignment whose final message was delivered.
func (c *Coordinator) over(id string) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	c.overLocked(id)
}

func (c *Coordinator) overLocked(id string) {
	if slot, ok := c.outstanding[id]; ok {
		delete(c.outstanding, id)
		if c.slots[slot] == id {
			delete(c.slots, slot)
		}
	}
}

// delivered records of how many hosts a read delivered finished rows, in
// the moving average perRead.
func (c *Coordinator) delivered(n int) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	c.perRead += (float64(n) - c.perRead) / 8
}

// polling says whether a promise to poll is being kept, and if so adds
// the outstanding assignments to ids (those to look up by id). The first
// read after the promise ended, by the coordinator's clock, is still one
// of them.
func (c *Coordinator) polling(ids []string) ([]string, bool) {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	if !c.clock.Now().Before(c.fastUntil) {
		if !c.owed {
			return ids, false
		}
		c.owed = false
	}
	for id := range c.outstanding {
		ids = append(ids, id)
	}
	return ids, true
}

// pollingOwed says whether a promise to poll is still to be kept.
func (c *Coordinator) pollingOwed() bool {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	return c.owed
}
