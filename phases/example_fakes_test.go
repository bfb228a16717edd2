package phases_test

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman/phases"
)

// scriptedAgent "fixes" the code on its second attempt, after feedback.
type scriptedAgent struct{ fixed bool }

func (a *scriptedAgent) Execute(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	a.fixed = req.Feedback != ""
	return phases.AgentResult{Success: true, SessionID: "session-1", Tokens: phases.TokenUsage{Input: 100, Output: 20}}, nil
}

// fakeRepo reports one new commit per build.
type fakeRepo struct{ commits int }

func (r *fakeRepo) Before(context.Context, string) (phases.BeforeState, error) {
	return phases.BeforeState{BaseCommit: "base"}, nil
}

func (r *fakeRepo) Capture(_ context.Context, _ string, _ phases.BeforeState, meta phases.SnapshotMeta) (phases.Snapshot, error) {
	r.commits++
	return phases.Snapshot{RunID: meta.RunID, Iteration: meta.Iteration,
		Commits:  []phases.Commit{{Hash: fmt.Sprint("c", r.commits)}},
		DiffHash: fmt.Sprint("diff-", r.commits)}, nil
}

// testGate passes once the agent has fixed the code.
type testGate struct{ agent *scriptedAgent }

func (g testGate) Verify(context.Context, phases.Snapshot, phases.GatePlan, phases.VerifyOptions) (phases.VerificationReport, error) {
	check := phases.CheckResult{Name: "unit", Level: phases.L1Tests, Passed: g.agent.fixed, ExitCode: 1, Output: "--- FAIL: TestAdd"}
	if check.Passed {
		check.ExitCode, check.Output = 0, "ok"
	}
	return phases.VerificationReport{Passed: check.Passed,
		Levels: []phases.LevelResult{{Level: phases.L1Tests, Passed: check.Passed, Checks: []phases.CheckResult{check}}}}, nil
}

// failingOutput is a feedback generator quoting the failing checks.
type failingOutput struct{}

func (failingOutput) Generate(_ context.Context, _ phases.Snapshot, r phases.VerificationReport, _ phases.GatePlan, _ phases.FeedbackOptions) (string, error) {
	out := ""
	for _, c := range r.FailedChecks() {
		out += fmt.Sprintf("%s %s failed:\n%s\n", c.Level, c.Name, c.Output)
	}
	return out, nil
}

func unitTestPlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
		Checks: []phases.GateCheck{{Name: "unit", Argv: []string{"go", "test", "./..."}}}}}}
}
