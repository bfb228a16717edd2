package worker_test

import (
	"context"
	"strconv"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

// finalInbox counts final messages and signals when want of them came.
type finalInbox struct {
	mu   sync.Mutex
	n    int
	want int
	done chan struct{}
	slot chan struct{} // one per run in flight
}

func (f *finalInbox) Deliver(_ context.Context, m worker.Message) (worker.Disposition, error) {
	if m.Kind == worker.MsgDone {
		f.mu.Lock()
		f.n++
		if f.n == f.want {
			close(f.done)
		}
		f.mu.Unlock()
		<-f.slot
	}
	return worker.Applied, nil
}

// BenchmarkRuntimeRuns: the Runtime's cost of one no-op run (ASSIGN to
// DONE), 64 at a time, as a worker host runs them (an event hook set,
// heartbeats every 10 s, no commits read).
func BenchmarkRuntimeRuns(b *testing.B) {
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true}, nil
	})
	in := &finalInbox{want: b.N, done: make(chan struct{}), slot: make(chan struct{}, 64)}
	rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, OnEvent: func(worker.Event) {}}, in)
	defer func() { _ = rt.Close(context.Background()) }()
	cmds := make([]worker.Command, b.N)
	for i := range cmds {
		id := strconv.Itoa(i)
		a := &worker.Assignment{ID: foreman.AssignmentID("a-" + id), Worker: foreman.WorkerID("w-" + strconv.Itoa(i%64)),
			Item: foreman.ItemID("item-" + id), Prompt: "noop", Worktree: "/nowhere", Attempt: 1}
		cmds[i] = worker.Command{Kind: worker.CommandAssign, Worker: foreman.WorkerID("r-" + id), Assignment: a.ID, Assign: a}
	}
	ctx := context.Background()
	b.ReportAllocs()
	b.ResetTimer()
	for i := range cmds {
		in.slot <- struct{}{}
		if err := rt.Send(ctx, cmds[i]); err != nil {
			b.Fatal(err)
		}
	}
	<-in.done
}
