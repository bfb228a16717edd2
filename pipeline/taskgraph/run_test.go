package taskgraph

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

func TestRunLongRunningWithFakeClock(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := foreman.NewFakeClock(t0)
	sp := &recordingSpawner{}
	rt, err := NewRuntime(Config{Store: newMemory(), Spawner: sp, Clock: clk, ResumeEvery: 10 * time.Minute})
	require.NoError(t, err)
	_, err = rt.Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)

	wake := make(chan WakeUp)
	results := make(chan Result, 8)
	done := make(chan error, 1)
	go func() { done <- rt.Run(ctx, "s1", wake, func(r Result) { results <- r }) }()
	require.NoError(t, clk.BlockUntil(ctx, 1), "the resume ticker is armed")

	wake <- WakeUp{}
	r := <-results
	require.Equal(t, []string{"PLAN-001"}, r.Spawned)

	clk.Advance(4 * time.Minute)
	wake <- Route("status?", nil)
	r = <-results
	require.Equal(t, HandleCheck, r.Handler)
	assert.Equal(t, "4m", r.Effects[0].Details.Report.ActiveWorkers[0].ElapsedText, "time comes from the injected clock")

	wake <- WakeUp{Handler: HandleCallback, Role: "planner", Assignment: sp.calls[0].Assignment, Outcome: OutcomeFailed}
	r = <-results
	assert.Equal(t, StepWorkerReset, r.Outcome)

	wake <- WakeUp{Handler: HandleCallback} // rejected, logged, skipped
	clk.Advance(6 * time.Minute)            // the periodic resume retries the task
	r = <-results
	assert.Equal(t, HandleResume, r.Handler)
	assert.Equal(t, []string{"PLAN-001"}, r.Spawned)
	assert.Equal(t, "PLAN-001.2", string(sp.calls[1].Assignment))

	// The planner finishes; the rest of the pipeline completes.
	for len(sp.calls) > 0 {
		s, _, err := rt.Load(ctx, "s1")
		require.NoError(t, err)
		if len(s.ActiveWorkers) == 0 {
			break
		}
		aw := s.ActiveWorkers[0]
		wake <- WakeUp{Handler: HandleCallback, Role: aw.Role, Assignment: aw.Assignment, Outcome: OutcomeCompleted}
		r = <-results
	}
	require.Equal(t, StepComplete, r.Outcome)
	clk.Advance(time.Hour) // no periodic resume once complete
	wake <- WakeUp{Handler: HandleCheck}
	r = <-results
	assert.Equal(t, HandleCheck, r.Handler, "the check is the next result: no resume ran in between")

	close(wake)
	require.NoError(t, <-done)

	ctx2, cancel2 := context.WithCancel(context.Background())
	go func() { done <- rt.Run(ctx2, "s1", make(chan WakeUp), nil) }()
	cancel2()
	assert.ErrorIs(t, <-done, context.Canceled)

	rt2, err := NewRuntime(Config{Store: newMemory(), Spawner: sp, Clock: clk})
	require.NoError(t, err)
	ch := make(chan WakeUp, 1)
	ch <- WakeUp{}
	assert.ErrorIs(t, rt2.Run(context.Background(), "missing", ch, nil), ErrSessionNotFound, "a system fault stops Run")
}

// TestDispatcherPipeline runs a fullstack pipeline end to end through a
// real worker.Dispatcher with in-process agents: spawns go through
// DispatcherSpawner, completions come back through WakeUpFromEvent.
func TestDispatcherPipeline(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	events := make(chan WakeUp, 64)
	d, err := worker.New(worker.Config{
		Mode:       worker.ModeFresh,
		MaxWorkers: 3,
		Commits:    worker.NoCommits,
		Agent: worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
			return phases.AgentResult{Success: true}, nil
		}),
		OnEvent: func(e worker.Event) {
			if w, ok := WakeUpFromEvent(e); ok {
				events <- w
			}
		},
	})
	require.NoError(t, err)
	defer func() { _ = d.Close() }()

	rt, err := NewRuntime(Config{Store: newMemory(), Spawner: DispatcherSpawner{Dispatcher: d, Worktree: func(SpawnRequest) string { return t.TempDir() }}, Logger: slog.New(slog.DiscardHandler)})
	require.NoError(t, err)
	_, err = rt.Create(ctx, "s1", "", ModeFullstack, nil)
	require.NoError(t, err)
	wake := make(chan WakeUp, 1)
	wake <- WakeUp{}
	complete := make(chan struct{})
	go func() {
		for {
			select {
			case w := <-events:
				wake <- w
			case <-complete:
				close(wake)
				return
			}
		}
	}()
	var once sync.Once
	err = rt.Run(ctx, "s1", wake, func(r Result) {
		if r.Outcome == StepComplete {
			once.Do(func() { close(complete) })
		}
	})
	require.NoError(t, err)
	report, err := rt.Status(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, SessionCompleted, report.State)
	assert.Equal(t, 6, report.Completed)
	assert.Zero(t, report.Counters.Stale)
}

func TestWakeUpFromEvent(t *testing.T) {
	w, ok := WakeUpFromEvent(worker.Event{Kind: worker.EventCompleted, Item: "IMPL-001.3", At: t0})
	require.True(t, ok)
	assert.Equal(t, WakeUp{Handler: HandleCallback, Assignment: "IMPL-001.3", Outcome: OutcomeCompleted, At: t0}, w)
	w, ok = WakeUpFromEvent(worker.Event{Kind: worker.EventParked, Item: "IMPL-001.3"})
	require.True(t, ok)
	assert.Equal(t, OutcomeFailed, w.Outcome)
	_, ok = WakeUpFromEvent(worker.Event{Kind: worker.EventRequeued, Item: "IMPL-001.3"})
	assert.False(t, ok)
	_, ok = WakeUpFromEvent(worker.Event{Kind: worker.EventCompleted})
	assert.False(t, ok)
}
