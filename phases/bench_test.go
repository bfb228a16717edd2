package phases_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

type noopAgent struct{}

func (noopAgent) Execute(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
	return phases.AgentResult{Success: true, SessionID: "s"}, nil
}

type noopSnapshotter struct{ snap phases.Snapshot }

func (noopSnapshotter) Before(context.Context, string) (phases.BeforeState, error) {
	return phases.BeforeState{}, nil
}

func (n noopSnapshotter) Capture(context.Context, string, phases.BeforeState, phases.SnapshotMeta) (phases.Snapshot, error) {
	return n.snap, nil
}

type noopVerifier struct{ report phases.VerificationReport }

func (n noopVerifier) Verify(context.Context, phases.Snapshot, phases.GatePlan, phases.VerifyOptions) (phases.VerificationReport, error) {
	return n.report, nil
}

type noopFeedback struct{}

func (noopFeedback) Generate(context.Context, phases.Snapshot, phases.VerificationReport, phases.GatePlan, phases.FeedbackOptions) (string, error) {
	return "fix it", nil
}

// BenchmarkOrchestratorIteration measures the orchestrator's own cost per
// iteration (build → snapshot → verify → feedback, the longest path) with
// no-op services, against a baseline that calls the same four services
// directly in the same run. Reported: ns/op and allocs/op of the
// orchestrator, baseline-ns/op and overhead-ns/op (orchestrator minus
// baseline).
func BenchmarkOrchestratorIteration(b *testing.B) {
	services := phases.PhaseServices{
		AgentDriver: noopAgent{}, Snapshotter: noopSnapshotter{changedSnapshot("h")},
		Verifier: noopVerifier{failReport("FAIL")}, FeedbackGenerator: noopFeedback{},
		Clock: foreman.NewFakeClock(startTime()),
	}
	pc := phaseContext(services)
	in := iterationInput()
	orch := phases.NewPhaseOrchestrator(phases.OrchestratorConfig{})
	ctx := context.Background()

	b.ReportAllocs()
	b.ResetTimer()
	for b.Loop() {
		res := orch.ExecuteIteration(ctx, pc, in)
		if res.StateTransition != phases.EventVerifyFailedRetryable {
			b.Fatal(res.StateTransition)
		}
	}
	b.StopTimer()
	perOp := float64(b.Elapsed().Nanoseconds()) / float64(b.N)

	// Baseline: the services alone, same number of iterations.
	start := time.Now()
	for range b.N {
		ar, _ := services.AgentDriver.Execute(ctx, phases.AgentRequest{TaskPrompt: in.TaskPrompt}, nil)
		snap, _ := services.Snapshotter.Capture(ctx, pc.WorkspacePath, in.BeforeState, phases.SnapshotMeta{})
		rep, _ := services.Verifier.Verify(ctx, snap, in.GatePlan, phases.VerifyOptions{})
		fb, _ := services.FeedbackGenerator.Generate(ctx, snap, rep, in.GatePlan, phases.FeedbackOptions{})
		if !ar.Success || fb == "" {
			b.Fatal("baseline")
		}
	}
	base := float64(time.Since(start).Nanoseconds()) / float64(b.N)
	b.ReportMetric(base, "baseline-ns/op")
	b.ReportMetric(perOp-base, "overhead-ns/op")
}

// BenchmarkRunLoopSingleIteration measures a whole run (state machine,
// transitions, records) that passes on the first iteration.
func BenchmarkRunLoopSingleIteration(b *testing.B) {
	loop := phases.NewRunLoop(phases.Config{Services: phases.PhaseServices{
		AgentDriver: noopAgent{}, Snapshotter: noopSnapshotter{changedSnapshot("h")},
		Verifier: noopVerifier{passReport()}, Clock: foreman.NewFakeClock(startTime()),
	}})
	req := phases.RunRequest{ItemID: "item-1", RunID: "run-1", WorkspacePath: "/ws",
		Task: phases.TaskSpec{Prompt: "p", GatePlan: gatePlan()}}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		res, err := loop.Run(ctx, req)
		if err != nil || res.State != phases.StateSucceeded {
			b.Fatal(res.State, err)
		}
	}
}
