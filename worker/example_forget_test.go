package worker_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// A host that never submits a parked item again (its retry is a new
// item) forgets it, so that the Dispatcher does not hold every failed
// attempt's prompt. Only a parked item can be forgotten.
func ExampleDispatcher_Forget() {
	ctx := context.Background()
	d, err := worker.New(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a", CrashBudget: -1,
		Clock: foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		panic(err)
	}
	_ = d.Submit(ctx, worker.Item{ID: "try-1", Prompt: "a long prompt"})
	_ = d.Submit(ctx, worker.Item{ID: "try-2", Prompt: "a long prompt"})
	// The first attempt's agent fails: with no crash budget it is parked.
	_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgFailed, Worker: "w1", Assignment: "a1", Reason: "exit 1"})
	fmt.Println("forget try-2:", errors.Is(d.Forget("try-2"), worker.ErrItemActive))
	fmt.Println("forget try-1:", d.Forget("try-1"))
	_, held := d.Item("try-1")
	fmt.Println("held:", held, "forgotten:", d.Stats().Forgotten)
	_ = d.Close()
	// Output:
	// ASSIGN w1 a1: try-1 attempt 1
	// RESET w1 a1 (agent failed: exit 1)
	// ASSIGN w1 a2: try-2 attempt 1
	// forget try-2: true
	// forget try-1: <nil>
	// held: false forgotten: 1
	// KILL w1 a2 (shutdown)
	// SHUTDOWN w1 a2 (shutdown)
}
