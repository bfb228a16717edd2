package phases_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/golang/mock/gomock"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

// step scripts one iteration of the mocked services.
type step struct {
	agent phases.AgentResult
	// during runs inside the agent; a non-nil error is returned by the driver.
	during    func(ctx context.Context, req phases.AgentRequest) error
	took      time.Duration // the agent advances the fake clock by this much
	snapshot  phases.Snapshot
	snapErr   error
	report    phases.VerificationReport
	verifyErr error
	feedback  string
}

func fails(hash, output string) step {
	return step{agent: phases.AgentResult{Success: true}, took: time.Minute, snapshot: changedSnapshot(hash),
		report: failReport(output), feedback: "fix: " + output}
}

func passes(hash string) step {
	return step{agent: phases.AgentResult{Success: true}, took: time.Minute, snapshot: changedSnapshot(hash), report: passReport()}
}

func (s step) with(f func(*step)) step { f(&s); return s }

type harnessOptions struct {
	persistErr error
	beforeErr  error
}

// harness is a RunLoop over gomock services scripted by steps, on a fake
// clock, recording what the loop did.
type harness struct {
	t         *testing.T
	clk       *foreman.FakeClock
	steps     []step
	cfg       phases.Config
	requests  []phases.AgentRequest
	events    []phases.TransitionEvent
	cleaned   []phases.RunResult
	iterSaves int
	runSaves  int
	feedbacks int
}

func newHarness(t *testing.T, opts harnessOptions, steps ...step) *harness {
	t.Helper()
	ctrl := gomock.NewController(t)
	h := &harness{t: t, clk: foreman.NewFakeClock(startTime()), steps: steps}
	agent := phasesmock.NewMockAgentDriver(ctrl)
	snapper := phasesmock.NewMockSnapshotter(ctrl)
	verifier := phasesmock.NewMockVerifier(ctrl)
	gen := phasesmock.NewMockFeedbackGenerator(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)

	snapper.EXPECT().Before(gomock.Any(), "/ws").Return(beforeState(), opts.beforeErr).MaxTimes(1)
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
			h.requests = append(h.requests, req)
			st := h.step(req.Iteration)
			h.clk.Advance(st.took)
			if st.during != nil {
				if err := st.during(ctx, req); err != nil {
					return phases.AgentResult{}, err
				}
			}
			res := st.agent
			if res.SessionID == "" {
				res.SessionID = fmt.Sprintf("sess-%d", req.Iteration)
			}
			return res, nil
		}).AnyTimes()
	snapper.EXPECT().Capture(gomock.Any(), "/ws", beforeState(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ string, _ phases.BeforeState, meta phases.SnapshotMeta) (phases.Snapshot, error) {
			st := h.step(meta.Iteration)
			return st.snapshot, st.snapErr
		}).AnyTimes()
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gatePlan(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ phases.Snapshot, _ phases.GatePlan, opts phases.VerifyOptions) (phases.VerificationReport, error) {
			st := h.step(opts.Iteration)
			return st.report, st.verifyErr
		}).AnyTimes()
	gen.EXPECT().Generate(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ phases.Snapshot, _ phases.VerificationReport, _ phases.GatePlan, opts phases.FeedbackOptions) (string, error) {
			h.feedbacks++
			return h.step(opts.Iteration).feedback, nil
		}).AnyTimes()
	persister.EXPECT().SaveAgentResult(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("agent.json", opts.persistErr).AnyTimes()
	persister.EXPECT().SaveVerificationReport(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("verification.json", opts.persistErr).AnyTimes()
	persister.EXPECT().SaveIteration(gomock.Any(), phases.RunID("run-1"), gomock.Any()).DoAndReturn(
		func(context.Context, phases.RunID, phases.IterationRecord) (string, error) {
			h.iterSaves++
			return "iteration.json", opts.persistErr
		}).AnyTimes()
	persister.EXPECT().SaveRun(gomock.Any(), gomock.Any()).DoAndReturn(func(ctx context.Context, _ phases.RunResult) (string, error) {
		h.runSaves++
		if ctx.Err() != nil {
			t.Error("SaveRun got a cancelled context")
		}
		return "run.json", opts.persistErr
	}).AnyTimes()

	h.cfg = phases.Config{
		Services: phases.PhaseServices{AgentDriver: agent, Snapshotter: snapper, Verifier: verifier,
			FeedbackGenerator: gen, ResultPersister: persister, Clock: h.clk},
		OnTransition: func(e phases.TransitionEvent) { h.events = append(h.events, e) },
		Cleanup: func(ctx context.Context, r phases.RunResult) error {
			if ctx.Err() != nil {
				t.Error("cleanup got a cancelled context")
			}
			h.cleaned = append(h.cleaned, r)
			return nil
		},
	}
	return h
}

func (h *harness) step(iteration int) step {
	if iteration < 1 || iteration > len(h.steps) {
		h.t.Errorf("iteration %d is not scripted", iteration)
		return step{}
	}
	return h.steps[iteration-1]
}

func (h *harness) run(ctx context.Context, limits phases.Limits) (phases.RunResult, error) {
	return phases.NewRunLoop(h.cfg).Run(ctx, phases.RunRequest{
		ItemID: "item-1", RunID: "run-1", WorkspacePath: "/ws",
		Task: phases.TaskSpec{Prompt: "add a feature", GatePlan: gatePlan(), Limits: limits},
	})
}

func (h *harness) emitted() []phases.RunEvent {
	out := make([]phases.RunEvent, len(h.events))
	for i, e := range h.events {
		out[i] = e.Event
	}
	return out
}
