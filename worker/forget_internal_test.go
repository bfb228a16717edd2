package worker

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// Forget drops a parked item and its prompt, and nothing else: an item
// still at work or unknown is refused, and a forgotten item submitted
// again is a new one.
func TestForgetDropsAParkedItemOnly(t *testing.T) {
	now := time.Date(2026, 2, 12, 9, 0, 0, 0, time.UTC)
	c := newCore(coreConfig{mode: ModePooled, maxWorkers: 1, crashBudget: 1, rememberFinished: 8,
		assignmentPrefix: "a", workerPrefix: "w"}, health.NewStuckQG(health.StuckQGConfig{}))
	require.NoError(t, c.addWorker("w1", now))
	for _, id := range []Item{{ID: "held", Prompt: "p"}, {ID: "queued", Prompt: "p"}, {ID: "parked", Prompt: "a long prompt"}} {
		require.NoError(t, c.submit(id, now))
	}
	c.park(c.items["parked"], "test", now)

	tests := []struct {
		id   string
		want error
	}{{"held", ErrItemActive}, {"queued", ErrItemActive}, {"nobody", ErrUnknownItem}, {"parked", nil}, {"parked", ErrUnknownItem}}
	for _, tt := range tests {
		err := c.forget(foreman.ItemID(tt.id))
		if tt.want == nil {
			require.NoError(t, err, tt.id)
		} else {
			assert.ErrorIs(t, err, tt.want, tt.id)
		}
	}
	_, held := c.items["parked"]
	assert.False(t, held, "the parked item (and its prompt) is still held")
	assert.Equal(t, uint64(1), c.stats.Forgotten)
	require.NoError(t, c.checkInvariants())
	require.NoError(t, c.submit(Item{ID: "parked"}, now), "a forgotten item submitted again is a new one")
	assert.Equal(t, Queued, c.items["parked"].state)
	require.NoError(t, c.checkInvariants())
}
