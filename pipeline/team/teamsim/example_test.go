package teamsim_test

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/teamsim"
)

// One seed, replayed: the same seed always tells the same story.
func ExampleRun() {
	ctx := context.Background()
	res, err := teamsim.Run(ctx, teamsim.Config{Seed: 42})
	if err != nil {
		panic(err)
	}
	again, _ := teamsim.Run(ctx, teamsim.Config{Seed: 42})
	fmt.Println("invariants hold:", res.Err() == nil)
	fmt.Println("same trace:", res.TraceHash == again.TraceHash)
	// Output:
	// invariants hold: true
	// same trace: true
}

// A host tests its own agents by plugging a model of them in: here an
// agent that always passes, in a world where nothing else goes wrong.
func ExampleConfig_agent() {
	faults := teamsim.NoFaults()
	res, err := teamsim.Run(context.Background(), teamsim.Config{
		Seed: 7, Faults: &faults, TotalBudget: -1,
		Agent: teamsim.DefaultAgent,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.End, res.Count(pipeline.StatusDone) == len(res.Stories), res.Err())
	// Output: finished true <nil>
}
