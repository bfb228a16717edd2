package taskgraph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestDefaultsAreCopies: a caller changing the default roles or
// checkpoints it was given, or the slices it configured a Core with,
// changes no Core, no Graph and no routing.
func TestDefaultsAreCopies(t *testing.T) {
	roles := DefaultRoles()
	for i := range roles {
		roles[i] = "poet"
	}
	cps := DefaultCheckpoints()
	cps[0].Task, cps[0].Modes[0] = "A", "custom"

	assert.Contains(t, DefaultRoles(), "planner", "a fresh copy every call")
	assert.Equal(t, "DISCUSS-006", DefaultCheckpoints()[0].Task)
	assert.Equal(t, ModeFullLifecycle, DefaultCheckpoints()[0].Modes[0])

	c := NewCore(CoreConfig{})
	assert.Contains(t, c.Roles(), "planner")
	assert.Equal(t, HandleCallback, Route("[planner] PLAN-001 completed", nil).Handler)
	_, err := NewGraph(nil, spec("PLAN-001", "planner"))
	require.NoError(t, err)
	_, ok := c.checkpointFor("A", "custom")
	assert.False(t, ok, "the changed copy is not the core's")
	_, ok = c.checkpointFor("DISCUSS-006", ModeFullLifecycle)
	assert.True(t, ok)

	// The slices a Core is configured with are copied too.
	mine := []string{"planner", "executor"}
	myCps := []Checkpoint{{Task: "A", Modes: []Mode{"custom"}}}
	c = NewCore(CoreConfig{Roles: mine, Checkpoints: myCps})
	mine[0] = "poet"
	myCps[0].Modes[0] = "other"
	assert.Equal(t, []string{"planner", "executor"}, c.Roles())
	_, ok = c.checkpointFor("A", "custom")
	assert.True(t, ok)
	assert.Empty(t, NewCore(CoreConfig{NoCheckpoints: true}).checkpoints)
}
