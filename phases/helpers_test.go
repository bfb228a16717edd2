package phases_test

import (
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

func startTime() time.Time { return time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC) }

func gatePlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "./..."}}}},
	}}
}

func passReport() phases.VerificationReport {
	return phases.VerificationReport{Passed: true, Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Passed: true, Checks: []phases.CheckResult{{Name: "vet", Level: phases.L0Contracts, Passed: true}}},
		{Level: phases.L1Tests, Passed: true, Checks: []phases.CheckResult{{Name: "test", Level: phases.L1Tests, Passed: true}}},
	}}
}

// failReport fails L1 with output.
func failReport(output string) phases.VerificationReport {
	return phases.VerificationReport{Passed: false, Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Passed: true, Checks: []phases.CheckResult{{Name: "vet", Level: phases.L0Contracts, Passed: true}}},
		{Level: phases.L1Tests, Passed: false, Checks: []phases.CheckResult{
			{Name: "test", Level: phases.L1Tests, Passed: false, ExitCode: 1, Output: output}}},
	}}
}

func changedSnapshot(hash string) phases.Snapshot {
	return phases.Snapshot{
		ID: "snap-" + hash, HeadCommit: "head-" + hash, DiffHash: hash,
		Commits: []phases.Commit{{Hash: "c-" + hash, Subject: "change"}},
		Files:   []phases.FileDiff{{Path: "main.go", Status: "M", Insertions: 3, Deletions: 1}},
	}
}

func beforeState() phases.BeforeState {
	return phases.BeforeState{BaseCommit: "base", BaseTree: "base-tree", DirtyFiles: []string{"notes.txt"}, CapturedAt: startTime()}
}

// phaseContext is a context for iteration 1 of run r1 with s as services.
func phaseContext(s phases.PhaseServices) *phases.PhaseContext {
	return &phases.PhaseContext{
		ItemID: foreman.ItemID("item-1"), RunID: "r1", Iteration: 1,
		Task:          phases.TaskSpec{Prompt: "add a feature", GatePlan: gatePlan()},
		WorkspacePath: "/work/space", BeforeState: beforeState(), Services: s,
		Run: phases.RunView{ItemID: "item-1", RunID: "r1", State: phases.StateBuilding, Iteration: 1, MaxIterations: 3},
	}
}
