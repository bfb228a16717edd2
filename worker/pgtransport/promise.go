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
)

// watch says whether a write of cmds promises to poll (ReadCooldown
// on); if so the promise starts now. Since transport schema 7 a poll
// costs what finished since the last one, not what is out (doneLog), so
// every write promises, however many assignments are out.
func (c *Coordinator) watch(cmds []worker.Command) (promise bool) {
	if c.cfg.ReadCooldown <= 0 || len(cmds) == 0 {
		return false
	}
	c.finMu.Lock()
	defer c.finMu.Unlock()
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

// polling keeps the books of a promise to poll at each read: the first
// read after the promise ended, by the coordinator's clock, is its last.
func (c *Coordinator) polling() {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	if !c.clock.Now().Before(c.fastUntil) {
		c.owed = false
	}
}

// pollingOwed says whether a promise to poll is still to be kept.
func (c *Coordinator) pollingOwed() bool {
	c.finMu.Lock()
	defer c.finMu.Unlock()
	return c.owed
}
