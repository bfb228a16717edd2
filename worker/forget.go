package worker

import (
	"fmt"

	"github.com/agentforeman/foreman"
)

// Forget drops a parked item: the Dispatcher no longer holds it (its
// prompt, worktree, feedback and counters), as it holds no completed one.
// A host that never submits a parked item again (a new attempt comes as a
// new item, as pipeline.DispatcherSpawner's do) forgets it so that what
// the Dispatcher holds does not grow with the work it has seen. An item
// that is not parked is refused with ErrItemActive, one the Dispatcher
// does not hold with ErrUnknownItem. Stats.Forgotten counts the items
// forgotten.
// It does not block (beyond the Dispatcher's lock), and is safe to call
// from OnEvent.
func (d *Dispatcher) Forget(id foreman.ItemID) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.forget(id)
}

func (c *core) forget(id foreman.ItemID) error {
	r, ok := c.items[id]
	switch {
	case !ok:
		return fmt.Errorf("%w: %s", ErrUnknownItem, id)
	case r.state != Parked:
		return fmt.Errorf("%w: %s is %s", ErrItemActive, id, r.state)
	}
	delete(c.items, id)
	c.stats.Forgotten++
	return nil
}
