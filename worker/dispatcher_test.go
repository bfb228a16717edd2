package worker_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestQueueIsPriorityThenFIFO(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	low1, low2, high := item("low-1"), item("low-2"), item("high")
	high.Priority = 5
	h.submit(item("first"), low1, low2, high)
	want := []foreman.ItemID{"first", "high", "low-1", "low-2"}
	for i, id := range want {
		a := h.lastAssign()
		require.Equal(t, id, a.Item, "assignment %d", i)
		h.deliver(msg(worker.MsgDone, a))
	}
	assert.Equal(t, uint64(4), h.d.Stats().Completed)
	assert.Equal(t, worker.Idle, h.worker("w1").State)
}

func TestTryAssignFillsThePoolUpToMaxWorkers(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 3})
	for _, id := range []string{"i1", "i2", "i3", "i4", "i5"} {
		h.submit(item(id))
	}
	assert.Len(t, h.assigns(), 3)
	assert.Equal(t, 2, h.d.Queued())
	busy := 0
	for _, w := range h.d.Workers() {
		if w.State == worker.Busy {
			busy++
		}
	}
	assert.Equal(t, 3, busy)
	assert.ErrorIs(t, h.d.Submit(context.Background(), item("i1")), worker.ErrItemActive)
	assert.ErrorIs(t, h.d.Submit(context.Background(), worker.Item{ID: "../x"}), foreman.ErrInvalidID)
}

func TestStaleAndDuplicateMessagesAreIgnoredAndCounted(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()

	// A message from the right worker with an assignment never issued.
	assert.Equal(t, worker.Stale, h.deliver(worker.Message{Kind: worker.MsgDone, Worker: a.Worker, Assignment: "a999"}))
	// The right assignment from another worker name.
	assert.Equal(t, worker.Stale, h.deliver(worker.Message{Kind: worker.MsgDone, Worker: "w9", Assignment: a.ID}))
	require.Equal(t, foreman.ItemID("story-a"), h.worker(a.Worker).Item, "nothing applied")

	require.Equal(t, worker.Applied, h.deliver(msg(worker.MsgDone, a)))
	b := h.lastAssign()
	require.Equal(t, a.Worker, b.Worker, "the worker name is reused for the next assignment")
	// A second DONE for the finished assignment is a duplicate; it must not
	// complete story-b, which the same worker name now holds.
	assert.Equal(t, worker.Duplicate, h.deliver(msg(worker.MsgDone, a)))
	assert.Equal(t, worker.Stale, h.deliver(msg(worker.MsgHeartbeat, a)))
	assert.Equal(t, foreman.ItemID("story-b"), h.worker(b.Worker).Item)

	// Malformed ids, unknown kinds and messages the state does not allow.
	disp, err := h.d.Deliver(context.Background(), worker.Message{Kind: worker.MsgDone, Worker: "", Assignment: b.ID})
	assert.Equal(t, worker.Invalid, disp)
	assert.ErrorIs(t, err, worker.ErrInvalidMessage)
	assert.ErrorIs(t, err, foreman.ErrInvalidID)
	disp, err = h.d.Deliver(context.Background(), worker.Message{Kind: 99, Worker: b.Worker, Assignment: b.ID})
	assert.Equal(t, worker.Invalid, disp)
	assert.ErrorIs(t, err, worker.ErrInvalidMessage)
	h.deliver(msg(worker.MsgReadyForReview, b))
	assert.Equal(t, worker.Duplicate, h.deliver(msg(worker.MsgReadyForReview, b)))
	disp, err = h.d.Deliver(context.Background(), msg(worker.MsgDone, b))
	assert.Equal(t, worker.Invalid, disp)
	var te *worker.TransitionError
	require.ErrorAs(t, err, &te)
	assert.ErrorIs(t, err, worker.ErrInvalidTransition)
	// A verdict for a stale assignment is ignored as well.
	disp, err = h.d.Review(context.Background(), worker.Verdict{Worker: a.Worker, Assignment: a.ID, Approved: true})
	require.NoError(t, err)
	assert.Equal(t, worker.Stale, disp)

	s := h.d.Stats()
	assert.Equal(t, uint64(4), s.Stale)
	assert.Equal(t, uint64(2), s.Duplicate)
	assert.Equal(t, uint64(3), s.Invalid)
	assert.Equal(t, uint64(1), s.Completed)
	assert.Equal(t, 4, h.eventCount(worker.EventStale))
	assert.Equal(t, 2, h.eventCount(worker.EventDuplicate))
}

func TestFirstRunningStatusIsProgressButNotLaterOnes(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"))
	a := h.lastAssign()
	running := msg(worker.MsgStatus, a)
	running.Status = worker.StatusRunning
	h.heartbeatFor(a, 10*time.Minute)
	h.deliver(running) // progress at 10 min
	h.heartbeatFor(a, 10*time.Minute)
	h.deliver(running) // not progress again
	assert.Empty(t, h.escalations(), "first running status moved progress to 10 min")
	h.heartbeatFor(a, 5*time.Minute)
	esc := h.escalations()
	require.Len(t, esc, 1, "a repeated running status is not progress")
	assert.Equal(t, worker.StuckWorker, esc[0].Kind)
	assert.Equal(t, uint64(1), h.d.Stats().Progress)
}

func TestStallBeyondBudgetParksTheItem(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"))
	h.heartbeatFor(h.lastAssign(), 15*time.Minute)
	b := h.lastAssign()
	require.Equal(t, 2, b.Attempt)
	h.heartbeatFor(b, 15*time.Minute)
	esc := h.escalations()
	require.Len(t, esc, 2)
	assert.False(t, esc[1].Requeued)
	assert.Equal(t, 2, esc[1].Stalls)
	info, _ := h.d.Item("story-a")
	assert.Equal(t, worker.Parked, info.State)
	assert.Equal(t, worker.Idle, h.worker(b.Worker).State)
	// A person resubmits it: counters start again.
	h.submit(item("story-a"))
	assert.Equal(t, 1, h.lastAssign().Attempt)
}

func TestSilentWorkerIsProbedThenRequeuedThenEscalatedCrashLimit(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"))
	a := h.lastAssign()
	h.clk.Advance(45 * time.Second) // no message at all
	h.check()
	assert.Empty(t, h.commands(worker.CommandKill), "silence alone is not a crash")
	require.Len(t, h.commands(worker.CommandProbe), 1)
	h.clk.Advance(2 * time.Minute) // the default probe timeout, unanswered
	h.check()
	kills := h.commands(worker.CommandKill)
	require.Len(t, kills, 1)
	assert.Equal(t, a.ID, kills[0].Assignment)
	assert.Empty(t, h.escalations(), "the first crash is within the crash budget")
	b := h.lastAssign()
	require.NotEqual(t, a.ID, b.ID)
	assert.Equal(t, foreman.ItemID("story-a"), b.Item)
	assert.Equal(t, 1, h.eventCount(worker.EventWorkerDead))

	h.clk.Advance(45*time.Second + 2*time.Minute)
	h.check()
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.CrashLimit, esc[0].Kind)
	assert.Equal(t, 2, esc[0].Crashes)
	assert.Equal(t, 1, esc[0].CrashBudget)
	info, ok := h.d.Item("story-a")
	require.True(t, ok, "never lost: parked for a person")
	assert.Equal(t, worker.Parked, info.State)
	assert.Equal(t, uint64(2), h.d.Stats().Probes)
}

func TestAgentFailureIsACrash(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, CrashBudget: 2})
	h.submit(item("story-a"))
	for i := 1; i <= 3; i++ {
		a := h.lastAssign()
		require.Equal(t, i, a.Attempt)
		m := msg(worker.MsgFailed, a)
		m.Reason = "exit 1"
		require.Equal(t, worker.Applied, h.deliver(m))
	}
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.CrashLimit, esc[0].Kind)
	assert.Contains(t, esc[0].Reason, "exit 1")
	assert.Len(t, h.commands(worker.CommandReset), 3)
}

func TestStuckQGAfterThreeIdenticalFailuresEscalates(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()
	qg := msg(worker.MsgQGResult, a)
	qg.QGOutput = "FAIL TestX: want 1, got 2"
	h.deliver(qg)
	h.deliver(qg)
	require.Empty(t, h.escalations())
	h.deliver(qg)
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.StuckQG, esc[0].Kind)
	assert.Equal(t, "quality gate: 3 of the last 3 outputs identical", esc[0].Reason)
	assert.Equal(t, 3, esc[0].QGRepeats)
	assert.Equal(t, 3, esc[0].QGStreak)
	assert.Equal(t, 10, esc[0].QGWindow)
	assert.Len(t, h.commands(worker.CommandReset), 1)
	assert.Equal(t, foreman.ItemID("story-b"), h.lastAssign().Item, "the worker moved on")
	info, _ := h.d.Item("story-a")
	assert.Equal(t, worker.Parked, info.State)
}

func TestFreshModeSpawnsAWorkerPerAssignmentAndShutsItDown(t *testing.T) {
	h := newHarness(t, worker.Config{Mode: worker.ModeFresh, MaxWorkers: 2})
	assert.Empty(t, h.d.Workers(), "no worker before there is work")
	h.submit(item("t1"), item("t2"), item("t3"))
	as := h.assigns()
	require.Len(t, as, 2)
	assert.NotEqual(t, as[0].Worker, as[1].Worker)
	h.deliver(msg(worker.MsgDone, as[0]))
	shut := h.commands(worker.CommandShutdown)
	require.Len(t, shut, 1)
	assert.Equal(t, as[0].Worker, shut[0].Worker)
	third := h.lastAssign()
	assert.Equal(t, foreman.ItemID("t3"), third.Item)
	assert.NotContains(t, []foreman.WorkerID{as[0].Worker, as[1].Worker}, third.Worker, "a fresh worker")
	_, ok := h.d.Worker(as[0].Worker)
	assert.False(t, ok, "the finished worker left the pool")
	assert.Len(t, h.d.Workers(), 2)
}

func TestFreshModeRejectionGoesToAFreshWorker(t *testing.T) {
	h := newHarness(t, worker.Config{Mode: worker.ModeFresh, MaxWorkers: 1})
	h.submit(reviewItem("story-a"))
	a := h.lastAssign()
	h.review(h.reachReview(a), false, "needs tests")
	b := h.lastAssign()
	assert.NotEqual(t, a.Worker, b.Worker)
	assert.Equal(t, 2, b.Attempt)
	assert.Contains(t, b.MemoryContext, "needs tests")
	h.review(h.reachReview(b), true, "")
	assert.Equal(t, uint64(1), h.d.Stats().Completed)
	assert.Empty(t, h.d.Workers())
}

func TestUnreachableWorkerIsDroppedAndItsItemRequeued(t *testing.T) {
	ctrl := gomock.NewController(t)
	tr := workermock.NewMockTransport(ctrl)
	clk := foreman.NewFakeClock(t0)
	gone := errors.New("connection refused")
	gomock.InOrder(
		tr.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, c worker.Command) error {
			require.Equal(t, worker.CommandAssign, c.Kind)
			require.Equal(t, foreman.WorkerID("w1"), c.Worker)
			return gone
		}),
		tr.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, c worker.Command) error {
			require.Equal(t, foreman.WorkerID("w2"), c.Worker)
			require.Equal(t, foreman.ItemID("story-a"), c.Assign.Item)
			return nil
		}),
	)
	tr.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil).AnyTimes() // shutdown
	d, err := worker.New(worker.Config{MaxWorkers: 2, Transport: tr, Clock: clk})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), item("story-a")))
	require.NoError(t, worker.CheckInvariants(d))
	_, ok := d.Worker("w1")
	assert.False(t, ok)
	w2, _ := d.Worker("w2")
	assert.Equal(t, worker.Busy, w2.State)
	// The pool can be refilled up to MaxWorkers.
	require.NoError(t, d.AddWorker(context.Background(), "w1"))
	assert.ErrorIs(t, d.AddWorker(context.Background(), "w3"), worker.ErrPoolFull)
}

func TestItemBudgetStopsAssigningThatItem(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, ItemBudget: worker.Budget{Tokens: 1000}})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()
	m := msg(worker.MsgFailed, a)
	m.Usage = worker.Usage{Tokens: 1500, CostUSD: 0.5}
	h.deliver(m) // overshoot: the run already spent it
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.BudgetExceeded, esc[0].Kind)
	assert.Equal(t, int64(1500), esc[0].ItemUsage.Tokens)
	info, _ := h.d.Item("story-a")
	assert.Equal(t, worker.Parked, info.State, "within the crash budget, but over the item budget")
	assert.Equal(t, foreman.ItemID("story-b"), h.lastAssign().Item)
	assert.Equal(t, worker.Usage{Tokens: 1500, CostUSD: 0.5}, h.d.Stats().Usage)
}

func TestTotalBudgetStopsAllAssignment(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, TotalBudget: worker.Budget{CostUSD: 1}})
	h.submit(item("story-a"), item("story-b"))
	a := h.lastAssign()
	done := msg(worker.MsgDone, a)
	done.Usage = worker.Usage{Tokens: 10, CostUSD: 1.25}
	h.deliver(done)
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.BudgetExceeded, esc[0].Kind)
	assert.Empty(t, esc[0].Item, "dispatcher-wide")
	assert.Len(t, h.assigns(), 1, "story-b waits")
	assert.Equal(t, 1, h.d.Queued())
	assert.True(t, h.d.Stats().Halted)
}

func TestEscalatorFailureIsReported(t *testing.T) {
	ctrl := gomock.NewController(t)
	tr := workermock.NewMockTransport(ctrl)
	tr.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	esc := workermock.NewMockEscalator(ctrl)
	esc.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(errors.New("pager down"))
	clk := foreman.NewFakeClock(t0)
	var failed []worker.Event
	d, err := worker.New(worker.Config{MaxWorkers: 1, Transport: tr, Escalator: esc, Clock: clk, CrashBudget: -1,
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventEscalationFailed {
				failed = append(failed, e)
			}
		}})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), item("story-a")))
	clk.Advance(45*time.Second + 2*time.Minute) // silent, probed, unanswered
	require.Len(t, failed, 1)
	assert.EqualError(t, failed[0].Err, "pager down")
	assert.Equal(t, worker.CrashLimit, failed[0].Escalation.Kind)
}

func TestNewRequiresATransportOrAgent(t *testing.T) {
	_, err := worker.New(worker.Config{})
	assert.ErrorIs(t, err, worker.ErrNoTransport)
	d, err := worker.New(worker.Config{Agent: worker.AgentFunc(nil), Clock: foreman.NewFakeClock(t0)})
	require.NoError(t, err)
	cfg := d.Config()
	assert.Equal(t, worker.DefaultMaxWorkers, cfg.MaxWorkers)
	assert.Equal(t, 45*time.Second, cfg.LivenessTimeout)
	assert.Equal(t, 15*time.Minute, cfg.ProgressTimeout)
	assert.Equal(t, 2, cfg.MaxReviewRejections)
	assert.Equal(t, 1, cfg.CrashBudget)
	assert.Equal(t, 3, cfg.StuckQGIdentical)
	assert.Equal(t, 10, cfg.StuckQGWindow)
	assert.Equal(t, 2*time.Minute, cfg.ProbeTimeout)
	require.NoError(t, d.Close())
	require.NoError(t, d.Close(), "safe twice")
	assert.ErrorIs(t, d.Submit(context.Background(), item("x")), worker.ErrStopped)
}

func TestAttemptDeadlineStallsEvenABusyWorkerAndFreshWorkersAreReplaced(t *testing.T) {
	h := newHarness(t, worker.Config{Mode: worker.ModeFresh, MaxWorkers: 1, AttemptTimeout: 20 * time.Minute})
	h.submit(item("story-a"))
	a := h.lastAssign()
	for i := range 4 { // progress every 5 minutes: never stuck, but too long
		h.heartbeatFor(a, 5*time.Minute)
		m := msg(worker.MsgQGResult, a)
		m.QGOutput = fmt.Sprint(i)
		h.deliver(m)
	}
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.StuckWorker, esc[0].Kind)
	assert.Equal(t, "attempt deadline passed", esc[0].Reason)
	b := h.lastAssign()
	assert.NotEqual(t, a.Worker, b.Worker, "a fresh worker takes the retry")
	assert.Len(t, h.commands(worker.CommandShutdown), 1)
}
