package gates_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
)

func Example() {
	dir, _ := os.MkdirTemp("", "gates-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	plan := phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "toolchain", Argv: []string{"true"}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "unit", Argv: []string{"sh", "-c", "echo 'TestAdd: 2+2 = 5, want 4'; exit 1"}},
		}},
		{Level: phases.L2BlackBox, Checks: []phases.GateCheck{{Name: "e2e", Argv: []string{"true"}}}},
	}}
	snapshot := phases.Snapshot{
		WorkspacePath: dir,
		Files:         []phases.FileDiff{{Path: "add.go", Status: "M", Insertions: 3, Deletions: 1}},
		Insertions:    3, Deletions: 1,
	}

	verifier := gates.NewVerifier(gates.VerifierConfig{})
	report, err := verifier.Verify(ctx, snapshot, plan, phases.VerifyOptions{RunID: "run-1", Iteration: 1})
	if err != nil {
		panic(err)
	}
	for _, lr := range report.Levels {
		fmt.Printf("%s passed=%v skipped=%v\n", lr.Level, lr.Passed, lr.Skipped)
	}

	feedback, err := gates.NewFeedbackGenerator(gates.FeedbackConfig{Instruction: "Fix the failing test."}).
		Generate(ctx, snapshot, report, plan, phases.FeedbackOptions{RunID: "run-1", Iteration: 1})
	if err != nil {
		panic(err)
	}
	fmt.Print(feedback)
	// Output:
	// L0 passed=true skipped=false
	// L1 passed=false skipped=false
	// L2 passed=false skipped=true
	// Verification failed on iteration 1: 1 check failed (L1).
	// Not run because an earlier level failed: L2.
	//
	// [L1] unit: exit code 1
	// Command: sh -c 'echo '\''TestAdd: 2+2 = 5, want 4'\''; exit 1'
	// Output:
	// TestAdd: 2+2 = 5, want 4
	//
	// Changes since the base: 1 file (+3 -1):
	//   M add.go (+3 -1)
	//
	// Fix the failing test.
}

type passingCI struct{}

func (passingCI) Check(context.Context, phases.Snapshot) (phases.LevelResult, error) {
	return phases.LevelResult{Passed: true, Checks: []phases.CheckResult{{Name: "github-actions", Passed: true}}}, nil
}

// An L3 level is answered by the configured CIChecker.
func ExampleCIChecker() {
	dir, _ := os.MkdirTemp("", "gates-example")
	defer os.RemoveAll(dir)
	verifier := gates.NewVerifier(gates.VerifierConfig{CI: passingCI{}})
	report, err := verifier.Verify(context.Background(), phases.Snapshot{WorkspacePath: dir},
		phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L3CI}}}, phases.VerifyOptions{})
	if err != nil {
		panic(err)
	}
	l3, _ := report.Level(phases.L3CI)
	fmt.Println(report.Passed, l3.Checks[0].Name)
	// Output: true github-actions
}
