package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type evidenceFunc func() worker.Evidence

func (f evidenceFunc) Evidence(context.Context, foreman.WorkerID, foreman.AssignmentID, time.Time) (worker.Evidence, error) {
	return f(), nil
}

// A rate-limited agent is not a crash: the item backs off, not before the
// reset the provider named, and is assigned again; the crash budget is
// untouched however often it happens.
func TestRateLimitedItemWaitsForTheResetAndIsNotACrash(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, CrashBudget: -1, RateLimitJitter: -1,
		RateLimitBackoff: time.Minute, RateLimitMaxBackoff: 4 * time.Minute})
	h.submit(item("story-a"))
	a := h.lastAssign()

	m := msg(worker.MsgRateLimited, a)
	m.ResetsAt, m.Reason = t0.Add(20*time.Minute), "You've hit your limit · resets 9:20am (UTC)"
	require.Equal(t, worker.Applied, h.deliver(m))
	info, ok := h.d.Item("story-a")
	require.True(t, ok)
	assert.Equal(t, worker.RateLimited, info.State)
	assert.Equal(t, 0, info.Crashes)
	assert.Equal(t, worker.RateLimitStatus{Items: 1, Until: t0.Add(20 * time.Minute)}, h.d.RateLimited())
	assert.Equal(t, worker.Idle, h.worker(a.Worker).State, "the worker is free for other work")
	h.mu.Lock()
	var ev worker.Event
	for _, e := range h.events {
		if e.Kind == worker.EventRateLimited {
			ev = e
		}
	}
	h.mu.Unlock()
	assert.Equal(t, 20*time.Minute, ev.Delay)
	assert.Equal(t, m.ResetsAt, ev.ResetsAt)
	assert.Equal(t, m.Reason, ev.Reason)

	h.clk.Advance(20*time.Minute - time.Second)
	assert.Len(t, h.assigns(), 1, "not retried before the reset")
	h.clk.Advance(time.Second)
	require.Len(t, h.assigns(), 2, "retried at the reset")
	assert.Equal(t, worker.RateLimitStatus{}, h.d.RateLimited())

	// Without a named reset: backoff doubling to its cap, never a crash.
	for i, want := range []time.Duration{2 * time.Minute, 4 * time.Minute, 4 * time.Minute} {
		b := h.lastAssign()
		require.Equal(t, worker.Applied, h.deliver(msg(worker.MsgRateLimited, b)))
		h.clk.Advance(want - time.Second)
		require.Len(t, h.assigns(), 2+i, "limit %d: not before its backoff %s", i+2, want)
		h.clk.Advance(time.Second)
		require.Len(t, h.assigns(), 3+i, "limit %d: retried after %s", i+2, want)
	}
	h.deliver(msg(worker.MsgDone, h.lastAssign()))
	st := h.d.Stats()
	assert.Equal(t, uint64(4), st.RateLimited)
	assert.Equal(t, uint64(0), st.Crashes)
	assert.Equal(t, uint64(1), st.Completed)
	assert.Empty(t, h.escalations())
}

func TestRateLimitJitterStaysWithinItsBound(t *testing.T) {
	for range 20 {
		h := newHarness(t, worker.Config{MaxWorkers: 1, RateLimitBackoff: time.Minute, RateLimitJitter: 30 * time.Second})
		h.submit(item("story-a"))
		h.deliver(msg(worker.MsgRateLimited, h.lastAssign()))
		var delay time.Duration
		h.mu.Lock()
		for _, e := range h.events {
			if e.Kind == worker.EventRateLimited {
				delay = e.Delay
			}
		}
		h.mu.Unlock()
		require.GreaterOrEqual(t, delay, time.Minute)
		require.Less(t, delay, time.Minute+30*time.Second)
		h.clk.Advance(delay)
		require.Len(t, h.assigns(), 2)
	}
}

// A host lowers concurrency while limits persist; lifting the bound
// assigns what waited.
func TestSetMaxActiveHoldsBackNewAssignments(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 3})
	require.NoError(t, h.d.SetMaxActive(context.Background(), 1))
	h.submit(item("a"), item("b"), item("c"))
	require.Len(t, h.assigns(), 1)
	assert.Equal(t, 2, h.d.Queued())
	h.deliver(msg(worker.MsgDone, h.lastAssign()))
	require.Len(t, h.assigns(), 2)
	require.NoError(t, h.d.SetMaxActive(context.Background(), 0))
	assert.Len(t, h.assigns(), 3)
	h.check()
}

// An agent waiting for a person is escalated with its question, parked,
// and never counted as a crash; nothing answers it.
func TestAgentWaitingForAPersonIsEscalatedWithTheQuestion(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, CrashBudget: -1})
	h.submit(item("story-a"))
	a := h.lastAssign()
	m := msg(worker.MsgNeedsPerson, a)
	m.Question = "Should the migration keep the old users table? (Keep it / Drop it)"
	require.Equal(t, worker.Applied, h.deliver(m))

	escs := h.escalations()
	require.Len(t, escs, 1)
	e := escs[0]
	assert.Equal(t, worker.NeedsPerson, e.Kind)
	assert.Equal(t, m.Question, e.Question)
	assert.Contains(t, e.Reason, "Should the migration keep the old users table?")
	assert.Equal(t, 0, e.Crashes)
	assert.False(t, e.Requeued)
	assert.NotEmpty(t, e.SuggestedAction)
	info, _ := h.d.Item("story-a")
	assert.Equal(t, worker.Parked, info.State)
	assert.Equal(t, uint64(0), h.d.Stats().Crashes)
	assert.Len(t, h.commands(worker.CommandReset), 1, "an agent still at its prompt is stopped, not answered")
	assert.Len(t, h.assigns(), 1, "not reassigned")
	require.Equal(t, worker.Duplicate, h.deliver(m))
}

// With evidence of work a stalled worker gets its extensions, then is
// killed as stuck; without, it is killed at once.
func TestSlowWorkerWithEvidenceIsExtendedOnce(t *testing.T) {
	tests := []struct {
		name       string
		evidence   worker.Evidence
		extensions int
		wantSlow   int
		killAfter  time.Duration
	}{
		{"output", worker.Evidence{OutputLines: 5}, 0, 1, 15*time.Minute + 15*time.Minute},
		{"files", worker.Evidence{Files: true}, 0, 1, 30 * time.Minute},
		{"cpu", worker.Evidence{CPU: 3 * time.Second}, 0, 1, 30 * time.Minute},
		{"cpu below the minimum", worker.Evidence{CPU: 200 * time.Millisecond}, 0, 0, 15 * time.Minute},
		{"nothing", worker.Evidence{}, 0, 0, 15 * time.Minute},
		{"extensions disabled", worker.Evidence{OutputLines: 5}, -1, 0, 15 * time.Minute},
		{"two extensions", worker.Evidence{OutputLines: 5}, 2, 2, 45 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, worker.Config{MaxWorkers: 1, LivenessTimeout: -1, SlowWorkerExtensions: tt.extensions,
				Evidence: evidenceFunc(func() worker.Evidence { return tt.evidence })})
			h.submit(item("story-a"))
			h.clk.Advance(tt.killAfter - time.Second)
			assert.Empty(t, h.commands(worker.CommandKill), "not killed before %s", tt.killAfter)
			h.clk.Advance(time.Second)
			assert.Len(t, h.commands(worker.CommandKill), 1, "killed at %s", tt.killAfter)
			assert.Equal(t, tt.wantSlow, h.eventCount(worker.EventSlowWorker))
			assert.Equal(t, uint64(tt.wantSlow), h.d.Stats().SlowExtensions)
			escs := h.escalations()
			require.Len(t, escs, 1)
			assert.Equal(t, worker.StuckWorker, escs[0].Kind)
		})
	}
}

// Progress during an extension resets the deadline as usual.
func TestSlowWorkerProgressAfterExtension(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, LivenessTimeout: -1,
		Evidence: evidenceFunc(func() worker.Evidence { return worker.Evidence{Files: true} })})
	h.submit(item("story-a"))
	a := h.lastAssign()
	h.clk.Advance(15 * time.Minute)
	require.Equal(t, 1, h.eventCount(worker.EventSlowWorker))
	h.deliver(msg(worker.MsgQGResult, a))
	h.clk.Advance(15*time.Minute - time.Second)
	assert.Empty(t, h.commands(worker.CommandKill))
	h.deliver(msg(worker.MsgDone, a))
	assert.Equal(t, uint64(1), h.d.Stats().Completed)
}
