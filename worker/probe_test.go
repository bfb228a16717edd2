package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/health/healthmock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A liveness expiry is not a crash: the worker is probed first (health's
// crash-detection protocol), and only an unanswered probe kills it.

func TestQuietWorkerThatAnswersTheProbeIsNotKilled(t *testing.T) {
	answers := []struct {
		name string
		msg  func(a worker.Assignment) worker.Message
	}{
		{"alive status", func(a worker.Assignment) worker.Message {
			m := msg(worker.MsgStatus, a)
			m.Status = worker.StatusAlive
			return m
		}},
		{"late heartbeat", func(a worker.Assignment) worker.Message { return msg(worker.MsgHeartbeat, a) }},
		{"quality gate result", func(a worker.Assignment) worker.Message {
			m := msg(worker.MsgQGResult, a)
			m.QGOutput = "FAIL x"
			return m
		}},
	}
	for _, tc := range answers {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, worker.Config{MaxWorkers: 1, ProbeTimeout: time.Minute})
			h.submit(item("story-a"))
			a := h.lastAssign()
			h.clk.Advance(45 * time.Second)
			probes := h.commands(worker.CommandProbe)
			require.Len(t, probes, 1)
			assert.Equal(t, a.ID, probes[0].Assignment)
			assert.Equal(t, a.Worker, probes[0].Worker)
			assert.Equal(t, health.ProbeText("story-a", 0), probes[0].Reason)
			assert.Equal(t, 1, h.eventCount(worker.EventWorkerSuspicious))

			h.clk.Advance(59 * time.Second)
			require.Equal(t, worker.Applied, h.deliver(tc.msg(a)))
			assert.Equal(t, 1, h.eventCount(worker.EventProbeAnswered))
			h.clk.Advance(time.Second) // the probe timeout would have been now
			h.check()
			assert.Empty(t, h.commands(worker.CommandKill))
			assert.Zero(t, h.eventCount(worker.EventWorkerDead))
			w := h.worker(a.Worker)
			assert.Equal(t, worker.Busy, w.State)
			assert.Equal(t, a.ID, w.Assignment)
			assert.Zero(t, h.d.Stats().Crashes)
			assert.Equal(t, uint64(1), h.d.Stats().ProbesAnswered)

			// The protocol starts over: the next silence is probed again,
			// not taken for a second strike.
			h.clk.Advance(45 * time.Second)
			assert.Len(t, h.commands(worker.CommandProbe), 2)
			assert.Empty(t, h.commands(worker.CommandKill))
		})
	}
}

func TestUnansweredProbeKillsTheWorkerAndRequeuesItsItem(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 2, ProbeTimeout: 30 * time.Second})
	h.submit(item("story-a"))
	a := h.lastAssign()
	h.clk.Advance(45 * time.Second)
	require.Len(t, h.commands(worker.CommandProbe), 1)
	h.clk.Advance(29 * time.Second)
	assert.Empty(t, h.commands(worker.CommandKill), "not before the probe timeout")
	h.clk.Advance(time.Second)
	h.check()
	kills := h.commands(worker.CommandKill)
	require.Len(t, kills, 1)
	assert.Equal(t, a.ID, kills[0].Assignment)
	assert.Equal(t, 1, h.eventCount(worker.EventWorkerDead))
	assert.Equal(t, 1, h.eventCount(worker.EventRequeued))
	b := h.lastAssign()
	assert.Equal(t, foreman.ItemID("story-a"), b.Item)
	assert.Equal(t, 2, b.Attempt)
	info, _ := h.d.Item("story-a")
	assert.Equal(t, 1, info.Crashes)
	assert.Empty(t, h.escalations())
	// A late answer from the killed assignment is fenced off.
	assert.Equal(t, worker.Stale, h.deliver(msg(worker.MsgStatus, a)))
}

func TestStaleRepliesDoNotClearSuspicion(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()
	require.Equal(t, worker.Applied, h.deliver(msg(worker.MsgDone, a)))
	b := h.lastAssign()
	require.Equal(t, a.Worker, b.Worker)

	h.clk.Advance(45 * time.Second)
	require.Len(t, h.commands(worker.CommandProbe), 1)
	old := msg(worker.MsgStatus, a) // the same worker name, the old assignment
	old.Status = worker.StatusAlive
	assert.Equal(t, worker.Stale, h.deliver(old))
	assert.Equal(t, worker.Stale, h.deliver(worker.Message{Kind: worker.MsgHeartbeat, Worker: "w9", Assignment: b.ID}))
	assert.Equal(t, worker.Duplicate, h.deliver(msg(worker.MsgDone, a)))
	assert.Zero(t, h.eventCount(worker.EventProbeAnswered))

	h.clk.Advance(2 * time.Minute)
	kills := h.commands(worker.CommandKill)
	require.Len(t, kills, 1, "none of them answered for the current assignment")
	assert.Equal(t, b.ID, kills[0].Assignment)
	assert.Equal(t, foreman.ItemID("story-b"), h.lastAssign().Item)
	assert.Equal(t, 2, h.lastAssign().Attempt)
}

func TestProbeThatCannotBeSentConfirmsTheCrash(t *testing.T) {
	ctrl := gomock.NewController(t)
	tr := workermock.NewMockTransport(ctrl)
	clk := foreman.NewFakeClock(t0)
	var got []worker.Command
	unreachable := map[foreman.WorkerID]bool{}
	tr.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, c worker.Command) error {
		got = append(got, c)
		if c.Kind == worker.CommandProbe {
			unreachable[c.Worker] = true
		}
		if unreachable[c.Worker] {
			return errors.New("connection refused")
		}
		return nil
	}).AnyTimes()
	d, err := worker.New(worker.Config{MaxWorkers: 2, Transport: tr, Clock: clk})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), item("story-a")))
	clk.Advance(45 * time.Second)
	require.NoError(t, worker.CheckInvariants(d))
	info, _ := d.Item("story-a")
	assert.Equal(t, 1, info.Crashes, "an undeliverable probe is an unanswered one")
	assert.Equal(t, worker.Assigned, info.State)
	assert.Equal(t, foreman.WorkerID("w2"), info.Worker, "requeued to the other worker")
	_, ok := d.Worker("w1")
	assert.False(t, ok, "the unreachable worker left the pool")
}

func TestItemCheckerDecidesWhatHappensAfterACrash(t *testing.T) {
	tests := []struct {
		name  string
		open  bool
		err   error
		state worker.ItemState
		known bool
		event worker.EventKind
		esc   worker.EscalationKind
	}{
		{name: "open: requeued", open: true, state: worker.Assigned, known: true, event: worker.EventRequeued},
		{name: "closed: dropped", open: false, event: worker.EventItemClosed},
		{name: "unknown: escalated", err: errors.New("board down"), state: worker.Parked, known: true,
			event: worker.EventParked, esc: worker.ItemCheckFailed},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			checker := healthmock.NewMockItemChecker(ctrl)
			checker.EXPECT().ItemOpen(gomock.Any(), foreman.ItemID("story-a")).Return(tc.open, tc.err)
			h := newHarness(t, worker.Config{MaxWorkers: 1, ItemChecker: checker})
			h.submit(item("story-a"))
			a := h.lastAssign()
			h.clk.Advance(45*time.Second + 2*time.Minute)
			h.check()
			require.Len(t, h.commands(worker.CommandKill), 1)
			assert.Equal(t, 1, h.eventCount(tc.event))
			info, ok := h.d.Item("story-a")
			require.Equal(t, tc.known, ok)
			if ok {
				assert.Equal(t, tc.state, info.State)
			}
			esc := h.escalations()
			if tc.esc == "" {
				assert.Empty(t, esc)
			} else {
				require.Len(t, esc, 1)
				assert.Equal(t, tc.esc, esc[0].Kind)
				assert.Equal(t, a.ID, esc[0].Assignment)
				assert.Contains(t, esc[0].Reason, "board down")
				assert.NotEmpty(t, esc[0].SuggestedAction)
			}
			if !tc.open {
				assert.Len(t, h.assigns(), 1, "a closed or unknown item is not reassigned")
				assert.Equal(t, worker.Idle, h.worker(a.Worker).State)
			}
		})
	}
}

func TestRuntimeAnswersProbesForItsCurrentAssignmentOnly(t *testing.T) {
	release := make(chan struct{})
	agent := worker.AgentFunc(func(ctx context.Context, _ phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		select {
		case <-release:
		case <-ctx.Done():
		}
		return phases.AgentResult{Success: true}, nil
	})
	in := make(chanInbox, 16)
	rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0)}, in)
	require.NoError(t, rt.Send(context.Background(), assignCmd("a1", "w1", false)))
	require.Equal(t, worker.MsgHeartbeat, next(t, in).Kind)
	// A probe for another assignment of the same worker gets no answer.
	require.NoError(t, rt.Send(context.Background(), worker.Command{Kind: worker.CommandProbe, Worker: "w1", Assignment: "a0"}))
	require.NoError(t, rt.Send(context.Background(), worker.Command{Kind: worker.CommandProbe, Worker: "w1", Assignment: "a1"}))
	m := next(t, in)
	assert.Equal(t, worker.MsgStatus, m.Kind)
	assert.Equal(t, worker.StatusAlive, m.Status)
	assert.Equal(t, foreman.AssignmentID("a1"), m.Assignment)
	close(release)
	assert.Equal(t, worker.MsgDone, next(t, in).Kind, "the next message is the outcome: one answer per probe")
	require.NoError(t, rt.Close(context.Background()))
}
