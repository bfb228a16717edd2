package worker

import (
	"testing"
	"time"

	"github.com/agentforeman/foreman/health"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The invariant checker must see an item that vanished without being
// completed or closed, wherever it was: the stress tests rely on it.
func TestCheckInvariantsFindsALostItem(t *testing.T) {
	now := time.Date(2026, 2, 12, 9, 0, 0, 0, time.UTC)
	newPool := func(t *testing.T) *core {
		t.Helper()
		c := newCore(coreConfig{mode: ModePooled, maxWorkers: 1, crashBudget: 1, rememberFinished: 8,
			assignmentPrefix: "a", workerPrefix: "w"}, health.NewStuckQG(health.StuckQGConfig{}))
		require.NoError(t, c.addWorker("w1", now))
		for _, id := range []Item{{ID: "held"}, {ID: "queued"}, {ID: "parked"}} {
			require.NoError(t, c.submit(id, now))
		}
		c.park(c.items["parked"], "test", now)
		require.NoError(t, c.checkInvariants())
		return c
	}
	tests := []struct {
		name string
		lose func(c *core)
		lost bool
	}{
		{"queued item dropped", func(c *core) { c.queue.remove(c.items["queued"]); delete(c.items, "queued") }, true},
		{"parked item dropped", func(c *core) { delete(c.items, "parked") }, true},
		{"parked item submitted again is one item", func(c *core) { require.NoError(t, c.submit(Item{ID: "parked"}, now)) }, false},
		{"completed item forgotten", func(c *core) { c.complete(c.items["held"].worker, now) }, false},
		{"parked item forgotten", func(c *core) { require.NoError(t, c.forget("parked")) }, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := newPool(t)
			tt.lose(c)
			err := c.checkInvariants()
			if tt.lost {
				assert.ErrorContains(t, err, "items lost")
			} else {
				assert.NoError(t, err)
			}
		})
	}
}
