package phases_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

// A run that fails verification once, gets feedback, and passes on the
// second iteration.
func ExampleRunLoop_Run() {
	agent := &scriptedAgent{}
	loop := phases.NewRunLoop(phases.Config{
		Services: phases.PhaseServices{AgentDriver: agent, Snapshotter: &fakeRepo{},
			Verifier: testGate{agent}, FeedbackGenerator: failingOutput{},
			Clock: foreman.NewFakeClock(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))},
		Limits: phases.Limits{MaxIterations: 5, MaxWallClock: time.Hour},
		OnTransition: func(e phases.TransitionEvent) {
			fmt.Printf("%d: %s --%s--> %s\n", e.Iteration, e.From, e.Event, e.To)
		},
	})

	res, err := loop.Run(context.Background(), phases.RunRequest{
		ItemID: "story-42", RunID: "run-1", WorkspacePath: "/tmp/ws",
		Task: phases.TaskSpec{Prompt: "make TestAdd pass", GatePlan: unitTestPlan()},
	})
	if err != nil {
		fmt.Println("error:", err)
		return
	}
	fmt.Println(res.State, res.Reason, "after", len(res.Iterations), "iterations,", res.Tokens.Total(), "tokens")
	// Output:
	// 0: QUEUED --WORKSPACE_ACQUIRED--> LEASED
	// 1: LEASED --BUILD_STARTED--> BUILDING
	// 1: BUILDING --BUILD_COMPLETED--> SNAPSHOTTING
	// 1: SNAPSHOTTING --SNAPSHOT_COMPLETED--> VERIFYING
	// 1: VERIFYING --VERIFY_FAILED_RETRYABLE--> FEEDBACK
	// 2: FEEDBACK --FEEDBACK_GENERATED--> BUILDING
	// 2: BUILDING --BUILD_COMPLETED--> SNAPSHOTTING
	// 2: SNAPSHOTTING --SNAPSHOT_COMPLETED--> VERIFYING
	// 2: VERIFYING --VERIFY_PASSED--> SUCCEEDED
	// SUCCEEDED verified after 2 iterations, 240 tokens
}

// The transition table, as data.
func ExampleNextState() {
	next, err := phases.NextState(phases.StateFeedback, phases.EventLimitExceeded)
	fmt.Println(next, err)
	_, err = phases.NextState(phases.StateSucceeded, phases.EventBuildStarted)
	fmt.Println(err)
	// Output:
	// FAILED <nil>
	// phases: invalid run transition: SUCCEEDED does not accept BUILD_STARTED
}
