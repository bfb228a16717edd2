package worker_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// printEscalations prints each escalation and each parked item.
func printEscalations(cfg worker.Config) worker.Config {
	cfg.Escalator = worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error {
		fmt.Printf("%s %s: %s (requeued %v)\n", e.Kind, e.Item, e.Reason, e.Requeued)
		return nil
	})
	cfg.OnEvent = func(e worker.Event) {
		if e.Kind == worker.EventParked {
			fmt.Println("parked", e.Item)
		}
	}
	return cfg
}

// An item whose agents have spent more than ItemBudget is escalated BUDGET
// once and never assigned again; the worker moves on to other work. The
// usage that crossed the budget was already spent: budgets are checked when
// usage is reported, so running work overshoots.
func Example_itemBudget() {
	ctx := context.Background()
	d, err := worker.New(printEscalations(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a",
		Clock:      foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		ItemBudget: worker.Budget{Tokens: 1000},
	}))
	if err != nil {
		panic(err)
	}
	_ = d.Submit(ctx, worker.Item{ID: "story-1"})
	_ = d.Submit(ctx, worker.Item{ID: "story-2"})
	// The first attempt spends 1200 tokens and fails: within the crash
	// budget it would be retried, but the item is over its budget.
	_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgFailed, Worker: "w1", Assignment: "a1",
		Reason: "exit 1", Usage: worker.Usage{Tokens: 1200}})
	info, _ := d.Item("story-1")
	fmt.Println("story-1:", info.State, info.Usage.Tokens, "tokens")
	_ = d.Close()
	// Output:
	// ASSIGN w1 a1: story-1 attempt 1
	// BUDGET story-1: item budget exceeded: 1200 tokens, $0.0000 (requeued false)
	// RESET w1 a1 (agent failed: exit 1)
	// parked story-1
	// ASSIGN w1 a2: story-2 attempt 1
	// story-1: Parked 1200 tokens
	// KILL w1 a2 (shutdown)
	// SHUTDOWN w1 a2 (shutdown)
}

// Each rejection reassigns the item with every reviewer's feedback; the
// rejection after MaxReviewRejections (here 1) escalates REVIEW_LIMIT,
// parks the item and resets the worker, which takes the next item in the
// same assign cycle.
func Example_reviewLimit() {
	ctx := context.Background()
	d, err := worker.New(printEscalations(worker.Config{
		MaxWorkers: 1, Transport: printTransport{}, AssignmentPrefix: "a",
		Clock:               foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)),
		MaxReviewRejections: 1,
	}))
	if err != nil {
		panic(err)
	}
	_ = d.Submit(ctx, worker.Item{ID: "story-1", RequireReview: true})
	_ = d.Submit(ctx, worker.Item{ID: "story-2"})
	for _, a := range []foreman.AssignmentID{"a1", "a2"} {
		_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgReadyForReview, Worker: "w1", Assignment: a})
		_, _ = d.Review(ctx, worker.Verdict{Worker: "w1", Assignment: a, Feedback: "no tests for " + string(a)})
	}
	info, _ := d.Item("story-1")
	fmt.Println("story-1:", info.State, "after", info.Rejections, "rejections")
	_ = d.Close()
	// Output:
	// ASSIGN w1 a1: story-1 attempt 1
	// ASSIGN w1 a2: story-1 attempt 2
	//   feedback: no tests for a1
	// REVIEW_LIMIT story-1: rejected 2 times (limit 1) (requeued false)
	// RESET w1 a2 (review limit)
	// parked story-1
	// ASSIGN w1 a3: story-2 attempt 1
	// story-1: Parked after 2 rejections
	// KILL w1 a3 (shutdown)
	// SHUTDOWN w1 a3 (shutdown)
}
