package taskgraph_test

import (
	"context"
	"fmt"
	"time"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The long-running mode: Run handles every wake-up from a channel, and a
// periodic resume on the (here fake) clock retries a failed worker. The
// Spawner plays the workers: each calls back at once, the planner failing
// its first attempt.
func ExampleRuntime_Run() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	clk := foreman.NewFakeClock(time.Date(2026, 2, 26, 10, 0, 0, 0, time.UTC))
	wake := make(chan taskgraph.WakeUp, 8)
	spawner := taskgraph.SpawnerFunc(func(_ context.Context, req taskgraph.SpawnRequest) error {
		outcome := taskgraph.OutcomeCompleted
		if req.Assignment == "PLAN-001.1" {
			outcome = taskgraph.OutcomeFailed
		}
		fmt.Printf("  spawn %s for %s (%s)\n", req.Role, req.Task, req.Assignment)
		wake <- taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: req.Role, Assignment: req.Assignment, Outcome: outcome}
		return nil
	})
	rt, err := taskgraph.NewRuntime(taskgraph.Config{
		Store: store.NewMemory(store.MemoryOptions{}), Spawner: spawner,
		Clock: clk, ResumeEvery: 5 * time.Minute,
	})
	if err != nil {
		panic(err)
	}
	if _, err := rt.Create(ctx, "fe", "shop", taskgraph.ModeFEOnly, nil); err != nil {
		panic(err)
	}

	reset, complete := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- rt.Run(ctx, "fe", wake, func(r taskgraph.Result) {
			fmt.Printf("%s: %s %v\n", r.Handler, r.Outcome, r.Spawned)
			switch r.Outcome {
			case taskgraph.StepWorkerReset:
				close(reset)
			case taskgraph.StepComplete:
				close(complete)
			}
		})
	}()
	wake <- taskgraph.WakeUp{Text: "start"}

	<-reset // the planner failed; nothing happens until the periodic resume
	if err := clk.BlockUntil(ctx, 1); err != nil {
		panic(err)
	}
	clk.Advance(5 * time.Minute)
	<-complete
	close(wake)
	fmt.Println("Run returned:", <-done)
	// Output:
	//   spawn planner for PLAN-001 (PLAN-001.1)
	// handleSpawnNext: spawned [PLAN-001]
	// handleCallback: worker_reset []
	//   spawn planner for PLAN-001 (PLAN-001.2)
	// handleResume: spawned [PLAN-001]
	//   spawn fe-developer for DEV-FE-001 (DEV-FE-001.3)
	// handleCallback: spawned [DEV-FE-001]
	//   spawn fe-qa for QA-FE-001 (QA-FE-001.4)
	// handleCallback: spawned [QA-FE-001]
	// handleCallback: complete []
	// Run returned: <nil>
}
