package transporttest

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

func testOutcomes(t *testing.T, f Factory) {
	var mu sync.Mutex
	seen := map[string]phases.AgentRequest{}
	agent := worker.AgentFunc(func(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		mu.Lock()
		seen[req.WorkspacePath] = req
		mu.Unlock()
		if strings.HasSuffix(req.WorkspacePath, "/fails") {
			return phases.AgentResult{Success: false, ExitCode: 3, Error: "tests are red"}, nil
		}
		return phases.AgentResult{Success: true}, nil
	})
	tr, in := open(t, f, agent)
	done, review, fails := assign("/wt/done", false), assign("/wt/review", true), assign("/wt/fails", false)
	for _, c := range []worker.Command{done, review, fails} {
		send(t, tr, c)
	}
	for _, tc := range []struct {
		cmd  worker.Command
		want worker.MessageKind
	}{{done, worker.MsgDone}, {review, worker.MsgReadyForReview}, {fails, worker.MsgFailed}} {
		m := in.await(t, tc.want.String()+" of "+string(tc.cmd.Assignment), of(tc.cmd.Assignment, tc.want))
		assert.Equal(t, tc.cmd.Worker, m.Worker, "the message names the worker the assignment was sent to")
		if tc.want == worker.MsgFailed {
			assert.Contains(t, m.Reason, "tests are red", "FAILED says why")
		}
	}
	mu.Lock()
	defer mu.Unlock()
	require.Contains(t, seen, "/wt/done")
	assert.Contains(t, seen["/wt/done"].TaskPrompt, done.Assign.Prompt, "the agent gets the assignment's prompt")
}

// blocker is an agent that runs until released or stopped, and says which.
type blocker struct {
	mu       sync.Mutex
	started  map[string]chan struct{}
	release  map[string]chan struct{}
	stopped  map[string]chan struct{}
	finished map[string]bool
}

func newBlocker() *blocker {
	return &blocker{started: map[string]chan struct{}{}, release: map[string]chan struct{}{},
		stopped: map[string]chan struct{}{}, finished: map[string]bool{}}
}

func (b *blocker) chans(wt string) (started, release, stopped chan struct{}) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.started[wt] == nil {
		b.started[wt], b.release[wt], b.stopped[wt] = make(chan struct{}), make(chan struct{}), make(chan struct{})
	}
	return b.started[wt], b.release[wt], b.stopped[wt]
}

func (b *blocker) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	started, release, stopped := b.chans(req.WorkspacePath)
	close(started)
	select {
	case <-release:
		return phases.AgentResult{Success: true}, nil
	case <-ctx.Done():
		close(stopped)
		return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
	}
}

func wait(t *testing.T, ch <-chan struct{}, what string) {
	t.Helper()
	select {
	case <-ch:
	case <-time.After(guard):
		t.Fatalf("%s: not within %v", what, guard)
	}
}

func testHeartbeatAndProbe(t *testing.T, f Factory) {
	b := newBlocker()
	tr, in := open(t, f, b)
	c := assign("/wt/beat", false)
	started, release, _ := b.chans("/wt/beat")
	send(t, tr, c)
	wait(t, started, "the agent starts")
	hb := in.await(t, "a HEARTBEAT", of(c.Assignment, worker.MsgHeartbeat))
	assert.Equal(t, c.Worker, hb.Worker)
	send(t, tr, worker.Command{Kind: worker.CommandProbe, Worker: c.Worker, Assignment: c.Assignment, Reason: "are you there?"})
	st := in.await(t, "the probe's answer", of(c.Assignment, worker.MsgStatus))
	assert.Equal(t, worker.StatusAlive, st.Status)
	close(release)
	in.await(t, "DONE after release", of(c.Assignment, worker.MsgDone))
}

func testKill(t *testing.T, f Factory) {
	b := newBlocker()
	tr, in := open(t, f, b)
	kill, reset := assign("/wt/kill", false), assign("/wt/reset", false)
	for _, c := range []worker.Command{kill, reset} {
		started, _, _ := b.chans(c.Assign.Worktree)
		send(t, tr, c)
		wait(t, started, "the agent starts")
	}
	send(t, tr, worker.Command{Kind: worker.CommandKill, Worker: kill.Worker, Assignment: kill.Assignment, Reason: "stalled"})
	send(t, tr, worker.Command{Kind: worker.CommandReset, Worker: reset.Worker, Assignment: reset.Assignment, Reason: "parked"})
	for _, c := range []worker.Command{kill, reset} {
		_, _, stopped := b.chans(c.Assign.Worktree)
		wait(t, stopped, c.Kind.String()+": the agent's context is cancelled")
	}
	// The same worker takes new work after a RESET, and it completes.
	again := assign("/wt/again", false)
	again.Worker, again.Assign.Worker = reset.Worker, reset.Worker
	_, release, _ := b.chans("/wt/again")
	close(release)
	send(t, tr, again)
	in.await(t, "DONE of the next assignment", of(again.Assignment, worker.MsgDone))
	closeTransport(t, tr)
	for _, m := range in.all() {
		if m.Assignment == kill.Assignment || m.Assignment == reset.Assignment {
			assert.False(t, isFinal(m.Kind), "nothing final follows a KILL or RESET: got %s of %s", m.Kind, m.Assignment)
		}
	}
}

func closeTransport(t *testing.T, tr worker.Transport) {
	t.Helper()
	if c, ok := tr.(worker.Closer); ok {
		ctx, cancel := context.WithTimeout(context.Background(), guard)
		defer cancel()
		require.NoError(t, c.Close(ctx))
	}
}

func testFence(t *testing.T, f Factory) {
	b := newBlocker()
	tr, in := open(t, f, b)
	c := assign("/wt/fence", false)
	started, release, stopped := b.chans("/wt/fence")
	send(t, tr, c)
	wait(t, started, "the agent starts")
	other := foreman.AssignmentID(string(c.Assignment) + "-old")
	send(t, tr, worker.Command{Kind: worker.CommandKill, Worker: c.Worker, Assignment: other, Reason: "stale kill"})
	send(t, tr, worker.Command{Kind: worker.CommandReset, Worker: c.Worker, Assignment: other, Reason: "stale reset"})
	// A probe of the current assignment is answered after the stale
	// commands, so the run outlived them.
	send(t, tr, worker.Command{Kind: worker.CommandProbe, Worker: c.Worker, Assignment: c.Assignment, Reason: "still there?"})
	in.await(t, "the probe's answer", of(c.Assignment, worker.MsgStatus))
	select {
	case <-stopped:
		t.Fatal("a command naming another assignment stopped the run")
	default:
	}
	close(release)
	in.await(t, "DONE", of(c.Assignment, worker.MsgDone))
	for _, m := range in.all() {
		assert.NotEqual(t, other, m.Assignment, "nothing answers for an assignment that was never sent")
	}
}

func testDispatcher(t *testing.T, f Factory) {
	const items = 24
	fwd := &forward{}
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		on(phases.StreamEvent{Kind: phases.StreamText, Line: "working on " + req.WorkspacePath})
		return phases.AgentResult{Success: true}, nil
	})
	tr := f(t, agent, fwd)
	completed := make(chan foreman.ItemID, items)
	d, err := worker.New(worker.Config{
		Transport: tr, MaxWorkers: 4, Commits: worker.NoCommits,
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventCompleted {
				completed <- e.Item
			}
		},
	})
	require.NoError(t, err)
	fwd.set(d)
	t.Cleanup(func() { _ = d.Close() })
	for i := range items {
		it := worker.Item{ID: foreman.ItemID("item-" + string(rune('a'+i))), Prompt: "p", Worktree: "/wt/d" + string(rune('a'+i))}
		require.NoError(t, d.Submit(context.Background(), it))
	}
	got := map[foreman.ItemID]bool{}
	for len(got) < items {
		select {
		case id := <-completed:
			assert.False(t, got[id], "item %s completed twice", id)
			got[id] = true
		case <-time.After(guard):
			t.Fatalf("%d of %d items completed within %v; stats %+v", len(got), items, guard, d.Stats())
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), guard)
	defer cancel()
	err = d.Shutdown(ctx)
	if err != nil && !errors.Is(err, context.Canceled) {
		t.Errorf("shutdown: %v", err)
	}
	assert.Zero(t, d.Stats().Invalid, "no message was invalid")
}

// forward delivers to a Dispatcher made after the transport.
type forward struct {
	mu sync.Mutex
	in worker.Inbox
}

func (f *forward) set(in worker.Inbox) {
	f.mu.Lock()
	f.in = in
	f.mu.Unlock()
}

func (f *forward) Deliver(ctx context.Context, m worker.Message) (worker.Disposition, error) {
	f.mu.Lock()
	in := f.in
	f.mu.Unlock()
	if in == nil {
		return worker.Stale, nil
	}
	return in.Deliver(ctx, m)
}
