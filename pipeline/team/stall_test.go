package team_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/worker"
)

// A hanging agent is stopped by the worker pool when its progress
// deadline passes (on the fake clock), resumed once by the crash protocol,
// and when it hangs again the story pauses as CRASHED with the cause the
// pool gave: no waiting on real time, no 2-minute probe.
func TestAStalledAgentPausesWithItsCause(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.hang")
	clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	f.cfg.Clock = clk
	f.cfg.Worker = worker.Config{ProgressTimeout: time.Minute, LivenessTimeout: -1}
	tm := f.newTeam(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))

	// Each time the agent has started (and so the pool set its deadline),
	// time jumps past the progress timeout.
	starts := f.startsOf(ctx, t, "A")
	go func() {
		for range starts {
			for i := 0; i < 3 && ctx.Err() == nil; i++ {
				clk.Advance(time.Minute + time.Second)
			}
		}
	}()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	s := stateOf(res, "A")
	require.Equal(t, team.StoryPaused, s.State, res.String())
	assert.Equal(t, pipeline.ReasonCrashed, s.Pause.Reason)
	assert.Contains(t, s.WorkerCause, "no progress")
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Contains(t, st.Text(), "cause: the worker made no progress")
	var troubles int
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventWorker {
			troubles++
		}
	}
	assert.GreaterOrEqual(t, troubles, 2, "each stall is an event")
}

// startsOf makes <id>.started a FIFO and returns the lines the hanging
// planner of story id writes to it (its FOREMAN_RESULT), one per start of
// its process, as they come: a test waits for the agent process without
// polling. The channel is closed when ctx ends.
func (f *fixture) startsOf(ctx context.Context, t *testing.T, id string) <-chan string {
	t.Helper()
	path := filepath.Join(f.ctl, id+".started")
	require.NoError(t, syscall.Mkfifo(path, 0o644))
	// Opened for reading and writing: the open does not wait for a writer,
	// and the reader sees no end of file between one agent's line and the
	// next. Closing it ends a read in progress (a FIFO is read through the
	// runtime's poller).
	fifo, err := os.OpenFile(path, os.O_RDWR, 0)
	require.NoError(t, err)
	stop := context.AfterFunc(ctx, func() { _ = fifo.Close() })
	t.Cleanup(func() { stop(); _ = fifo.Close() })
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(fifo)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			case <-ctx.Done():
				return
			}
		}
	}()
	return lines
}
