package worker_test

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// printTransport stands for a network transport: it prints each command.
type printTransport struct{}

func (printTransport) Send(_ context.Context, c worker.Command) error {
	if c.Kind == worker.CommandAssign {
		fmt.Printf("%s %s %s: %s attempt %d\n", c.Kind, c.Worker, c.Assignment, c.Assign.Item, c.Assign.Attempt)
		if c.Assign.Feedback != "" {
			fmt.Printf("  feedback: %s\n", c.Assign.Feedback)
		}
		return nil
	}
	fmt.Printf("%s (%s)\n", strings.TrimSpace(fmt.Sprintf("%s %s %s", c.Kind, c.Worker, c.Assignment)), c.Reason)
	return nil
}

// The protocol by hand: an assignment, a review rejection that reassigns
// with the reviewer's feedback, and a late message from the old assignment
// fenced off by its assignment id.
func Example() {
	ctx := context.Background()
	d, err := worker.New(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a",
		Clock: foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
	})
	if err != nil {
		panic(err)
	}

	_ = d.Submit(ctx, worker.Item{ID: "story-1", Prompt: "add a flag", Worktree: "/wt/story-1", RequireReview: true})
	_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgReadyForReview, Worker: "w1", Assignment: "a1"})
	_, _ = d.Review(ctx, worker.Verdict{Worker: "w1", Assignment: "a1", Feedback: "the flag needs a test"})

	disp, _ := d.Deliver(ctx, worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	fmt.Println("late DONE for a1:", disp)
	disp, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a2"})
	fmt.Println("DONE for a2:", disp)
	fmt.Println("completed:", d.Stats().Completed, "stale:", d.Stats().Stale)
	_ = d.Close()
	// Output:
	// ASSIGN w1 a1: story-1 attempt 1
	// ASSIGN w1 a2: story-1 attempt 2
	//   feedback: the flag needs a test
	// late DONE for a1: stale
	// DONE for a2: applied
	// completed: 1 stale: 1
	// SHUTDOWN w1 (shutdown)
}

// A worker that heartbeats but makes no progress for ProgressTimeout is
// escalated STUCK_WORKER and killed, and its item is reassigned.
func Example_progressTimeout() {
	ctx := context.Background()
	clk := foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d, err := worker.New(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a", Clock: clk,
		Escalator: worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error {
			fmt.Printf("%s %s (stalls %d/%d, requeued %v)\n", e.Kind, e.Item, e.Stalls, e.StallBudget, e.Requeued)
			return nil
		}),
	})
	if err != nil {
		panic(err)
	}
	_ = d.Submit(ctx, worker.Item{ID: "story-1"})
	for range 90 { // 15 minutes of heartbeats and nothing else
		clk.Advance(10 * time.Second)
		_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgHeartbeat, Worker: "w1", Assignment: "a1"})
	}
	_ = d.Close() // the second attempt is killed and the item stays queued
	// Output:
	// ASSIGN w1 a1: story-1 attempt 1
	// STUCK_WORKER story-1 (stalls 1/1, requeued true)
	// KILL w1 a1 (no progress since 2026-01-01T00:00:00Z though heartbeats continued)
	// ASSIGN w1 a2: story-1 attempt 2
	// KILL w1 a2 (shutdown)
	// SHUTDOWN w1 a2 (shutdown)
}

// A worker that falls silent is probed before it is declared crashed. The
// first time it answers and keeps its assignment; the second time it does
// not answer within ProbeTimeout, so it is killed and its item reassigned.
func Example_probe() {
	ctx := context.Background()
	clk := foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	d, err := worker.New(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a", Clock: clk,
		OnEvent: func(e worker.Event) {
			switch e.Kind {
			case worker.EventWorkerSuspicious, worker.EventProbeAnswered, worker.EventWorkerDead:
				fmt.Println(e.Kind, e.Assignment)
			}
		},
	})
	if err != nil {
		panic(err)
	}
	_ = d.Submit(ctx, worker.Item{ID: "story-1"})
	clk.Advance(45 * time.Second) // silence: suspicious, probed
	_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgStatus, Worker: "w1", Assignment: "a1", Status: worker.StatusAlive})
	clk.Advance(45 * time.Second) // silent again: probed again
	clk.Advance(2 * time.Minute)  // no answer within the probe timeout
	fmt.Println("crashes:", d.Stats().Crashes)
	_ = d.Close()
	// Output:
	// ASSIGN w1 a1: story-1 attempt 1
	// worker_suspicious a1
	// PROBE w1 a1 (Status check: are you still working on Stage 0 for story-1?)
	// probe_answered a1
	// worker_suspicious a1
	// PROBE w1 a1 (Status check: are you still working on Stage 0 for story-1?)
	// worker_dead a1
	// KILL w1 a1 (no answer to the probe within the probe timeout)
	// ASSIGN w1 a2: story-1 attempt 2
	// crashes: 1
	// KILL w1 a2 (shutdown)
	// SHUTDOWN w1 a2 (shutdown)
}
