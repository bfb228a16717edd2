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

func TestStuckQGCountsIdenticalOutputsWithinTheWindow(t *testing.T) {
	h := newHarness(t, worker.Config{MaxWorkers: 1, StuckQGWindow: 5})
	h.submit(item("story-a"))
	a := h.lastAssign()
	for i, out := range []string{"x", "y", "x", "y"} {
		m := msg(worker.MsgQGResult, a)
		m.QGOutput = "FAIL " + out
		require.Equal(t, worker.Applied, h.deliver(m), "output %d", i)
	}
	require.Empty(t, h.escalations(), "two of each is not stuck")
	m := msg(worker.MsgQGResult, a)
	m.QGOutput = "FAIL x"
	h.deliver(m)
	esc := h.escalations()
	require.Len(t, esc, 1, "alternating failures: three x among the last five")
	assert.Equal(t, worker.StuckQG, esc[0].Kind)
	assert.Equal(t, "quality gate: 3 of the last 5 outputs identical", esc[0].Reason)
	assert.Equal(t, 3, esc[0].QGRepeats)
	assert.Equal(t, 5, esc[0].QGWindow)
	assert.Equal(t, 1, esc[0].QGStreak)
}

// Every way an item leaves the Dispatcher's hands frees its quality-gate
// history, so the detector holds only items still being worked on.
func TestEveryWayOutOfTheWorkerResetsStuckQG(t *testing.T) {
	fail := func(h *harness, a worker.Assignment) {
		m := msg(worker.MsgQGResult, a)
		m.QGOutput = "FAIL once"
		require.Equal(t, worker.Applied, h.deliver(m))
	}
	paths := []struct {
		name  string
		cfg   worker.Config
		item  worker.Item
		leave func(h *harness, a worker.Assignment)
	}{
		{name: "done", item: item("x"), leave: func(h *harness, a worker.Assignment) { h.deliver(msg(worker.MsgDone, a)) }},
		{name: "review approved", item: reviewItem("x"), leave: func(h *harness, a worker.Assignment) { h.review(h.reachReview(a), true, "") }},
		{name: "review limit", cfg: worker.Config{MaxReviewRejections: -1}, item: reviewItem("x"),
			leave: func(h *harness, a worker.Assignment) { h.review(h.reachReview(a), false, "no") }},
		{name: "crash limit", cfg: worker.Config{CrashBudget: -1}, item: item("x"), leave: func(h *harness, a worker.Assignment) {
			m := msg(worker.MsgFailed, a)
			h.deliver(m)
		}},
		{name: "silent beyond the crash budget", cfg: worker.Config{CrashBudget: -1}, item: item("x"),
			leave: func(h *harness, _ worker.Assignment) { h.clk.Advance(45*time.Second + 2*time.Minute) }},
		{name: "stall beyond the stall budget", cfg: worker.Config{StallBudget: -1}, item: item("x"),
			leave: func(h *harness, a worker.Assignment) { h.heartbeatFor(a, 15*time.Minute) }},
		{name: "item budget", cfg: worker.Config{ItemBudget: worker.Budget{Tokens: 1}}, item: item("x"),
			leave: func(h *harness, a worker.Assignment) {
				m := msg(worker.MsgHeartbeat, a)
				m.Usage.Tokens = 5
				h.deliver(m)
				h.deliver(msg(worker.MsgFailed, a)) // requeued, then parked when picked up
			}},
		{name: "stuck quality gate", item: item("x"), leave: func(h *harness, a worker.Assignment) { fail(h, a); fail(h, a) }},
		{name: "closed after a crash", cfg: worker.Config{ItemChecker: closedBoard{}}, item: item("x"),
			leave: func(h *harness, _ worker.Assignment) { h.clk.Advance(45*time.Second + 2*time.Minute) }},
	}
	for _, p := range paths {
		t.Run(p.name, func(t *testing.T) {
			p.cfg.MaxWorkers = 1
			h := newHarness(t, p.cfg)
			h.submit(p.item)
			a := h.lastAssign()
			fail(h, a)
			require.Equal(t, 1, worker.StuckQGLen(h.d))
			p.leave(h, a)
			h.check()
			info, held := h.d.Item(p.item.ID)
			if held {
				require.Contains(t, []worker.ItemState{worker.Parked}, info.State, "the item left the workers")
			}
			assert.Zero(t, worker.StuckQGLen(h.d))
		})
	}
}

// closedBoard says every item is closed.
type closedBoard struct{}

func (closedBoard) ItemOpen(_ context.Context, _ foreman.ItemID) (bool, error) { return false, nil }
