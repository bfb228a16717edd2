package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/hashicorp/go-multierror"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestShutdownWaitsForRunningWorkThenStops(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()
	res := make(chan error, 1)
	go func() { res <- h.d.Shutdown(context.Background()) }()
	require.NoError(t, h.clk.BlockUntil(context.Background(), 2)) // deadlines + soft timeout
	assert.ErrorIs(t, h.d.Submit(context.Background(), item("story-c")), worker.ErrStopped)
	h.deliver(msg(worker.MsgDone, a)) // finishes inside the soft timeout
	require.NoError(t, <-res)
	assert.Len(t, h.assigns(), 1, "nothing new was assigned while stopping")
	assert.Empty(t, h.commands(worker.CommandKill))
	assert.Len(t, h.commands(worker.CommandShutdown), 1)
	assert.Equal(t, uint64(1), h.d.Stats().Completed)
	info, ok := h.d.Item("story-b")
	require.True(t, ok)
	assert.Equal(t, worker.Queued, info.State, "never lost")
	require.NoError(t, h.d.Shutdown(context.Background()), "safe twice")
	require.NoError(t, h.d.Close())
}

func TestShutdownKillsWhatOutlivesTheSoftTimeout(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 2, ShutdownTimeout: time.Minute})
	h.submit(item("story-a"), item("story-b"))
	res := make(chan error, 1)
	go func() { res <- h.d.Shutdown(context.Background()) }()
	require.NoError(t, h.clk.BlockUntil(context.Background(), 2))
	// Heartbeats keep the workers alive while the soft timeout runs.
	for range 6 {
		for _, a := range h.assigns() {
			h.deliver(msg(worker.MsgHeartbeat, a))
		}
		h.clk.Advance(10 * time.Second)
	}
	require.NoError(t, <-res)
	kills := h.commands(worker.CommandKill)
	assert.Len(t, kills, 2)
	assert.Len(t, h.commands(worker.CommandShutdown), 2)
	assert.Empty(t, h.d.Workers())
	for _, id := range []foreman.ItemID{"story-a", "story-b"} {
		info, ok := h.d.Item(id)
		require.True(t, ok)
		assert.Equal(t, worker.Queued, info.State, "%s is requeued, not lost", id)
	}
	assert.Equal(t, worker.Stale, h.deliver(msg(worker.MsgDone, h.assigns()[0])), "late completions are fenced off")
}

func TestShutdownReportsWorkersThatDidNotStop(t *testing.T) {
	clk := foreman.NewFakeClock(t0)
	release := make(chan struct{})
	started := make(chan struct{}, 2)
	stubborn := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		started <- struct{}{}
		<-release // ignores ctx: a process that will not die
		return phases.AgentResult{}, ctx.Err()
	})
	d, err := worker.New(worker.Config{MaxWorkers: 2, Agent: stubborn, Commits: worker.NoCommits, Clock: clk, KillTimeout: 5 * time.Second})
	require.NoError(t, err)
	require.NoError(t, d.Submit(context.Background(), item("story-a")))
	require.NoError(t, d.Submit(context.Background(), item("story-b")))
	<-started
	<-started
	// The caller gives up at once: no soft wait, and the workers that were
	// killed but have not stopped are reported.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	err = d.Shutdown(ctx)
	require.Error(t, err)
	var merr *multierror.Error
	require.ErrorAs(t, err, &merr)
	assert.Len(t, merr.Errors, 2)
	var se *worker.StopError
	require.ErrorAs(t, err, &se)
	assert.Contains(t, []foreman.WorkerID{"w1", "w2"}, se.Worker)
	assert.True(t, errors.Is(err, context.Canceled))
	close(release)
	assert.Equal(t, err, d.Close(), "safe twice, same report")
	info, ok := d.Item("story-a")
	require.True(t, ok)
	assert.Equal(t, worker.Queued, info.State)
}
