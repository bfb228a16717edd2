package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
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
	go func() {
		for n := 0; ctx.Err() == nil; n++ {
			started := filepath.Join(f.ctl, fmt.Sprintf("A.started-%d", n))
			for ctx.Err() == nil {
				if _, err := os.Stat(started); err == nil {
					break
				}
				time.Sleep(5 * time.Millisecond) // polls a file another process writes
			}
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
