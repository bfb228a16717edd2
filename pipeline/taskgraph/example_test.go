package taskgraph_test

import (
	"context"
	"fmt"
	"os"
	"time"

	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The status report of handleCheck, from the pure core: a fullstack
// pipeline whose plan and both implementations are done.
func ExampleStatusReport_Text() {
	core := taskgraph.NewCore(taskgraph.CoreConfig{})
	start := time.Date(2026, 2, 26, 10, 0, 0, 0, time.UTC)
	s, _ := core.NewSession("shop", taskgraph.ModeFullstack, nil, start)

	// complete plays a worker reporting its task done, fenced by its
	// assignment.
	complete := func(task string, at time.Time) {
		t, _ := s.Graph.Task(task)
		s, _, _ = core.Handle(s, taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: t.Role, Assignment: t.Assignment, Outcome: taskgraph.OutcomeCompleted, At: at})
	}
	s, _, _ = core.Handle(s, taskgraph.WakeUp{At: start}) // spawn PLAN-001
	complete("PLAN-001", start.Add(10*time.Minute))
	complete("IMPL-001", start.Add(40*time.Minute))
	complete("DEV-FE-001", start.Add(55*time.Minute))

	_, res, _ := core.Handle(s, taskgraph.Route("check", nil).WithTime(start.Add(58*time.Minute)))
	fmt.Print(res.Effects[0].Text())
	// Output:
	// [coordinator] Pipeline Status
	// [coordinator] Mode: fullstack | Progress: 3/6 (50%)
	//
	// [coordinator] Execution Graph:
	//   Impl Phase:
	//     [done PLAN-001]
	//       ├─ BE: [done IMPL-001] → [>>> TEST-001] → [o REVIEW-001]
	//       └─ FE: [done DEV-FE-001] → [>>> QA-FE-001]
	//
	//   done=completed  >>>=running  o=pending  .=not created
	//
	// [coordinator] Active Workers:
	//   > TEST-001 (tester) - running 18m
	//   > QA-FE-001 (fe-qa) - running 3m
	//
	// [coordinator] Commands: 'resume' to advance | 'check' to refresh
}

// Dependency cycles are rejected when the tasks are created.
func ExampleNewGraph_cycle() {
	_, err := taskgraph.NewGraph(nil,
		taskgraph.TaskSpec{Subject: "PLAN-001", Role: "planner", BlockedBy: []string{"REVIEW-001"}},
		taskgraph.TaskSpec{Subject: "IMPL-001", Role: "executor", BlockedBy: []string{"PLAN-001"}},
		taskgraph.TaskSpec{Subject: "REVIEW-001", Role: "reviewer", BlockedBy: []string{"IMPL-001"}},
	)
	fmt.Println(err)
	// Output:
	// taskgraph: dependency cycle: PLAN-001 -> REVIEW-001 -> IMPL-001 -> PLAN-001
}

// One step per invocation: each wake-up is handled by a fresh Runtime over
// the same store.
func ExampleRuntime_StepText() {
	ctx := context.Background()
	st := store.NewMemory(store.MemoryOptions{})
	spawner := taskgraph.SpawnerFunc(func(_ context.Context, req taskgraph.SpawnRequest) error {
		fmt.Printf("(spawning %s for %s under %s)\n", req.Role, req.Task, req.Assignment)
		return nil
	})
	invoke := func() *taskgraph.Runtime {
		rt, err := taskgraph.NewRuntime(taskgraph.Config{Store: st, Spawner: spawner, Reporter: taskgraph.TextReporter(os.Stdout)})
		if err != nil {
			panic(err)
		}
		return rt
	}
	if _, err := invoke().Create(ctx, "fe", "shop", taskgraph.ModeFEOnly, nil); err != nil {
		panic(err)
	}
	_, _ = invoke().StepText(ctx, "fe", "start")
	// The planner marks its task done and calls back.
	_, _ = invoke().Update(ctx, "fe", taskgraph.TaskUpdate{Task: "PLAN-001", To: taskgraph.Completed, Assignment: "PLAN-001.1"})
	_, _ = invoke().StepText(ctx, "fe", "[planner] PLAN-001 completed")
	// Output:
	// (spawning planner for PLAN-001 under PLAN-001.1)
	// [coordinator] > Spawned: planner → PLAN-001 (assignment PLAN-001.1)
	// [coordinator] 1 agent(s) spawned. Pipeline: 0/3 completed
	// [coordinator] Type 'check' to see status, 'resume' to advance after completion.
	// [coordinator] done PLAN-001 confirmed complete (planner)
	// (spawning fe-developer for DEV-FE-001 under DEV-FE-001.2)
	// [coordinator] > Spawned: fe-developer → DEV-FE-001 (assignment DEV-FE-001.2)
	// [coordinator] 1 agent(s) spawned. Pipeline: 1/3 completed
	// [coordinator] Type 'check' to see status, 'resume' to advance after completion.
}

// Route picks a handler for a wake-up text by priority: a known role's tag,
// then "check"/"status", then "resume"/"continue"/"next", else spawn-next.
func ExampleRoute() {
	for _, text := range []string{"[tester] TEST-001 completed", "status", "resume", "go"} {
		fmt.Printf("%q → %s\n", text, taskgraph.Route(text, nil).Handler)
	}
	// Output:
	// "[tester] TEST-001 completed" → handleCallback
	// "status" → handleCheck
	// "resume" → handleResume
	// "go" → handleSpawnNext
}
