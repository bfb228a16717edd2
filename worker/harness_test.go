package worker_test

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/require"
)

var t0 = time.Date(2026, 2, 12, 9, 0, 0, 0, time.UTC)

// harness is a Dispatcher over a mocked Transport and Escalator and a fake
// clock. The mocks record what they receive; tests assert on the records.
type harness struct {
	t   *testing.T
	clk *foreman.FakeClock
	d   *worker.Dispatcher
	tr  *workermock.MockTransport
	esc *workermock.MockEscalator

	mu     sync.Mutex
	cmds   []worker.Command
	escs   []worker.Escalation
	events []worker.Event
}

func newHarness(t *testing.T, cfg worker.Config) *harness {
	t.Helper()
	ctrl := gomock.NewController(t)
	h := &harness{t: t, clk: foreman.NewFakeClock(t0)}
	h.tr = workermock.NewMockTransport(ctrl)
	h.esc = workermock.NewMockEscalator(ctrl)
	h.tr.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, c worker.Command) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.cmds = append(h.cmds, c)
		return nil
	}).AnyTimes()
	h.esc.EXPECT().Escalate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, e worker.Escalation) error {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.escs = append(h.escs, e)
		return nil
	}).AnyTimes()
	cfg.Transport, cfg.Escalator, cfg.Clock = h.tr, h.esc, h.clk
	if cfg.AssignmentPrefix == "" {
		cfg.AssignmentPrefix = "a"
	}
	cfg.OnEvent = func(e worker.Event) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.events = append(h.events, e)
	}
	d, err := worker.New(cfg)
	require.NoError(t, err)
	h.d = d
	t.Cleanup(func() { _ = d.Close() })
	return h
}

func (h *harness) submit(items ...worker.Item) {
	h.t.Helper()
	for _, it := range items {
		require.NoError(h.t, h.d.Submit(context.Background(), it))
	}
	h.check()
}

func (h *harness) check() {
	h.t.Helper()
	require.NoError(h.t, worker.CheckInvariants(h.d))
}

// deliver sends m and checks the pool is consistent afterwards.
func (h *harness) deliver(m worker.Message) worker.Disposition {
	h.t.Helper()
	disp, _ := h.d.Deliver(context.Background(), m)
	h.check()
	return disp
}

func (h *harness) review(w worker.WorkerInfo, approved bool, feedback string) worker.Disposition {
	h.t.Helper()
	disp, err := h.d.Review(context.Background(), worker.Verdict{Worker: w.ID, Assignment: w.Assignment, Approved: approved, Feedback: feedback})
	require.NoError(h.t, err)
	h.check()
	return disp
}

// assigns returns the ASSIGN commands sent so far.
func (h *harness) assigns() []worker.Assignment {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []worker.Assignment
	for _, c := range h.cmds {
		if c.Kind == worker.CommandAssign {
			out = append(out, *c.Assign)
		}
	}
	return out
}

func (h *harness) lastAssign() worker.Assignment {
	h.t.Helper()
	a := h.assigns()
	require.NotEmpty(h.t, a)
	return a[len(a)-1]
}

func (h *harness) commands(kind worker.CommandKind) []worker.Command {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []worker.Command
	for _, c := range h.cmds {
		if c.Kind == kind {
			out = append(out, c)
		}
	}
	return out
}

func (h *harness) escalations() []worker.Escalation {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]worker.Escalation(nil), h.escs...)
}

func (h *harness) eventCount(kind worker.EventKind) int {
	h.mu.Lock()
	defer h.mu.Unlock()
	n := 0
	for _, e := range h.events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func (h *harness) worker(id foreman.WorkerID) worker.WorkerInfo {
	h.t.Helper()
	w, ok := h.d.Worker(id)
	require.True(h.t, ok, "worker %s", id)
	return w
}

// msg builds a message fenced with a's worker and assignment.
func msg(kind worker.MessageKind, a worker.Assignment) worker.Message {
	return worker.Message{Kind: kind, Worker: a.Worker, Assignment: a.ID}
}

func item(id string) worker.Item {
	return worker.Item{ID: foreman.ItemID(id), Prompt: "do " + id, Worktree: "/wt/" + id}
}

func reviewItem(id string) worker.Item {
	it := item(id)
	it.RequireReview = true
	return it
}

// heartbeatFor advances the clock in heartbeat steps for d, heartbeating a
// after each step, as a live but idle runtime would.
func (h *harness) heartbeatFor(a worker.Assignment, d time.Duration) {
	h.t.Helper()
	for step := 10 * time.Second; d > 0; d -= step {
		h.clk.Advance(step)
		h.deliver(worker.Message{Kind: worker.MsgHeartbeat, Worker: a.Worker, Assignment: a.ID, Commit: "c0"})
	}
}
