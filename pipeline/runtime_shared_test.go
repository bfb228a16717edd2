package pipeline_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// TestRuntimeNoticesAnotherRuntimesWrite has two runtimes take turns on
// one item in one store. Each remembers the record it wrote last, so that
// its next event needs no read; when the other runtime has written since,
// the remembered record is stale and the event must be decided again on
// the stored one, not fail with a conflict or act on old state.
func TestRuntimeNoticesAnotherRuntimesWrite(t *testing.T) {
	ctx := context.Background()
	st := store.NewMemory(store.MemoryOptions{})
	w := newStoryWorld() // the services both runtimes use
	newRuntime := func() *pipeline.Runtime {
		rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: st, Spawner: w, Messenger: w,
			Worktrees: w, Merger: w, Board: w, Escalator: w, Reporter: w})
		require.NoError(t, err)
		return rt
	}
	runtimes := []*pipeline.Runtime{newRuntime(), newRuntime()}
	state, err := runtimes[0].Start(ctx, "S-1", "")
	require.NoError(t, err)
	for stage, line := range storyLines {
		rt := runtimes[(stage+1)%2] // alternate, starting with the other one
		env, err := message.Open(state.Worker, state.Assignment, fmt.Sprintf(line, "S-1"), time.Time{})
		require.NoError(t, err)
		state, err = rt.Deliver(ctx, "S-1", env)
		require.NoError(t, err, "stage %d", stage)
		assert.Zero(t, state.Stale, "stage %d: the report was from the current worker", stage)
	}
	assert.Equal(t, pipeline.StatusDone, state.Status)
	stored, err := runtimes[0].Get(ctx, "S-1")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusDone, stored.Status)
	assert.Equal(t, int64(6), stored.Steps, "every transition once")
}
