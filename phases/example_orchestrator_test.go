package phases_test

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman/phases"
)

// One iteration: the gate fails, so the orchestrator produces feedback and
// says the run may continue.
func ExamplePhaseOrchestrator_ExecuteIteration() {
	agent := &scriptedAgent{}
	services := phases.PhaseServices{AgentDriver: agent, Snapshotter: &fakeRepo{},
		Verifier: testGate{agent}, FeedbackGenerator: failingOutput{}}
	orch := phases.NewPhaseOrchestrator(phases.OrchestratorConfig{}) // the default handlers

	pc := &phases.PhaseContext{RunID: "run-1", Iteration: 1, WorkspacePath: "/tmp/ws", Services: services,
		Task: phases.TaskSpec{Prompt: "make TestAdd pass", GatePlan: unitTestPlan()}}
	res := orch.ExecuteIteration(context.Background(), pc, phases.IterationInput{
		TaskPrompt: pc.Task.Prompt, GatePlan: pc.Task.GatePlan})

	fmt.Println("events:", res.Events)
	fmt.Println("continue:", res.ShouldContinue, "session:", res.NextSessionID)
	fmt.Print("feedback: ", res.NextFeedback)
	// Output:
	// events: [BUILD_COMPLETED SNAPSHOT_COMPLETED VERIFY_FAILED_RETRYABLE]
	// continue: true session: session-1
	// feedback: L1 unit failed:
	// --- FAIL: TestAdd
}
