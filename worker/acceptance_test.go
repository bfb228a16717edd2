package worker_test

// The acceptance criteria for recovering a worker after a review rejection
// and after a progress timeout, one test each: AC1, a review escalation
// frees the worker for new work within one assign cycle; AC2, no quality-gate
// output survives a reassignment; AC3, a reassignment carries every
// reviewer's feedback; AC4, a worker that heartbeats without progress is
// escalated STUCK_WORKER and its item reassigned. The criteria "all existing
// tests pass" and "escalation cleanup, progress timeout and stale
// quality-gate output are tested" are met by the whole suite.

import (
	"fmt"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// reachReview assigns nothing new: it takes a's work to READY_FOR_REVIEW.
func (h *harness) reachReview(a worker.Assignment) worker.WorkerInfo {
	h.t.Helper()
	require.Equal(h.t, worker.Applied, h.deliver(msg(worker.MsgReadyForReview, a)))
	w := h.worker(a.Worker)
	require.Equal(h.t, worker.Reviewing, w.State)
	return w
}

func TestAC1_ReviewEscalationFreesWorkerForNewWorkWithinOneAssignCycle(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(reviewItem("story-a"), item("story-b"))
	first := h.lastAssign()
	require.Equal(t, foreman.ItemID("story-a"), first.Item)

	a := first
	for i := 1; i <= 3; i++ {
		h.deliver(worker.Message{Kind: worker.MsgQGResult, Worker: a.Worker, Assignment: a.ID, QGOutput: fmt.Sprintf("lint failed %d", i)})
		w := h.reachReview(a)
		h.review(w, false, "rejection")
		if i < 3 {
			a = h.lastAssign()
			require.Equal(t, foreman.ItemID("story-a"), a.Item, "rejection %d is reassigned", i)
		}
	}

	// The third rejection escalated REVIEW_LIMIT...
	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.ReviewLimit, esc[0].Kind)
	assert.Equal(t, foreman.ItemID("story-a"), esc[0].Item)
	assert.Equal(t, 3, esc[0].Rejections)
	assert.Equal(t, 2, esc[0].MaxReviewRejections)
	assert.Equal(t, 3, esc[0].Attempt)
	assert.NotEmpty(t, esc[0].SuggestedAction)
	// ...the old subprocess was reset...
	resets := h.commands(worker.CommandReset)
	require.Len(t, resets, 1)
	assert.Equal(t, a.ID, resets[0].Assignment)
	// ...and, in the same call, the freed worker took the next item.
	next := h.lastAssign()
	assert.Equal(t, foreman.ItemID("story-b"), next.Item)
	assert.Equal(t, first.Worker, next.Worker)
	w := h.worker(first.Worker)
	assert.Equal(t, worker.Busy, w.State)
	assert.Equal(t, foreman.ItemID("story-b"), w.Item)
	assert.Equal(t, "/wt/story-b", w.Worktree)
	assert.Empty(t, w.PendingQGOutput)
	parked, ok := h.d.Item("story-a")
	require.True(t, ok)
	assert.Equal(t, worker.Parked, parked.State)
	assert.Empty(t, parked.Worker)
}

func TestAC1_ReviewEscalationLeavesWorkerIdleWhenNoWork(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, MaxReviewRejections: -1})
	h.submit(reviewItem("story-a"))
	a := h.lastAssign()
	h.deliver(worker.Message{Kind: worker.MsgQGResult, Worker: a.Worker, Assignment: a.ID, QGOutput: "fail"})
	h.review(h.reachReview(a), false, "no")
	w := h.worker(a.Worker)
	assert.Equal(t, worker.Idle, w.State)
	assert.Empty(t, w.Item)
	assert.Empty(t, w.Assignment)
	assert.Empty(t, w.Worktree)
	assert.Empty(t, w.PendingQGOutput)
	// The worker's heartbeats for the escalated assignment are stale now:
	// it cannot live on as a zombie holding the item.
	assert.Equal(t, worker.Stale, h.deliver(msg(worker.MsgHeartbeat, a)))
	h.submit(item("story-c"))
	assert.Equal(t, foreman.ItemID("story-c"), h.lastAssign().Item)
}

func TestAC2_PendingQGOutputIsEmptyAfterRejectionReassign(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(reviewItem("story-a"))
	a := h.lastAssign()
	h.deliver(worker.Message{Kind: worker.MsgQGResult, Worker: a.Worker, Assignment: a.ID, QGPassed: true, QGOutput: "ok: 12 tests"})
	require.Equal(t, "ok: 12 tests", h.worker(a.Worker).PendingQGOutput)
	h.review(h.reachReview(a), false, "missing edge case")

	b := h.lastAssign()
	require.NotEqual(t, a.ID, b.ID)
	w := h.worker(b.Worker)
	assert.Equal(t, b.ID, w.Assignment)
	assert.Equal(t, worker.Busy, w.State)
	assert.Empty(t, w.PendingQGOutput)
}

func TestAC3_RejectionReassignCarriesReviewerFeedbackInMemoryContext(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	it := reviewItem("story-a")
	it.MemoryContext = "Earlier session: chose sqlite."
	h.submit(it)
	a1 := h.lastAssign()
	assert.Equal(t, 1, a1.Attempt)
	assert.Equal(t, "Earlier session: chose sqlite.", a1.MemoryContext)
	h.review(h.reachReview(a1), false, "handle the empty input")
	a2 := h.lastAssign()
	h.review(h.reachReview(a2), false, "the error message is wrong")
	a3 := h.lastAssign()

	assert.Equal(t, 2, a2.Attempt)
	assert.Equal(t, 3, a3.Attempt)
	assert.Equal(t, "the error message is wrong", a3.Feedback)
	assert.Contains(t, a2.MemoryContext, "handle the empty input")
	assert.Contains(t, a3.MemoryContext, "Earlier session: chose sqlite.")
	assert.Contains(t, a3.MemoryContext, "Rejection 1 ---\nhandle the empty input")
	assert.Contains(t, a3.MemoryContext, "Rejection 2 ---\nthe error message is wrong")
	assert.Contains(t, a3.MemoryContext, "attempt 3")
	info, _ := h.d.Item("story-a")
	assert.Equal(t, []string{"handle the empty input", "the error message is wrong"}, info.Feedback)
}

func TestAC4_NoProgressFor15MinutesEscalatesStuckWorker(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1})
	h.submit(item("story-a"))
	a := h.lastAssign()
	// Heartbeats keep flowing (the runtime is alive) but nothing happens.
	h.heartbeatFor(a, 15*time.Minute-10*time.Second)
	require.Empty(t, h.escalations(), "not stuck before the progress timeout")
	h.heartbeatFor(a, 10*time.Second)

	esc := h.escalations()
	require.Len(t, esc, 1)
	assert.Equal(t, worker.StuckWorker, esc[0].Kind)
	assert.Equal(t, a.ID, esc[0].Assignment)
	assert.Equal(t, a.Worker, esc[0].Worker)
	assert.Equal(t, 1, esc[0].Stalls)
	assert.True(t, esc[0].Requeued)
	kills := h.commands(worker.CommandKill)
	require.Len(t, kills, 1)
	assert.Equal(t, a.ID, kills[0].Assignment)
	// The item was reassigned under a new fencing token.
	b := h.lastAssign()
	assert.Equal(t, foreman.ItemID("story-a"), b.Item)
	assert.NotEqual(t, a.ID, b.ID)
	assert.Equal(t, 2, b.Attempt)
}

func TestAC4_ProgressEventsKeepAWorkerFromBeingStuck(t *testing.T) {
	events := []struct {
		name string
		msg  func(a worker.Assignment, i int) worker.Message
	}{
		{"QG results", func(a worker.Assignment, i int) worker.Message {
			m := msg(worker.MsgQGResult, a)
			m.QGOutput = string(rune('a' + i%20))
			return m
		}},
		{"new commits", func(a worker.Assignment, i int) worker.Message {
			m := msg(worker.MsgHeartbeat, a)
			m.Commit = "commit-" + string(rune('a'+i%26))
			return m
		}},
	}
	for _, tc := range events {
		t.Run(tc.name, func(t *testing.T) {
			h := newHarness(t, worker.Config{MaxWorkers: 1})
			h.submit(item("story-a"))
			a := h.lastAssign()
			for i := range 8 { // an hour, progress every 10 minutes
				h.heartbeatFor(a, 10*time.Minute)
				require.Equal(t, worker.Applied, h.deliver(tc.msg(a, i)))
			}
			assert.Empty(t, h.escalations())
			assert.Equal(t, worker.Busy, h.worker(a.Worker).State)
		})
	}
}
