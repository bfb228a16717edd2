package phases

import (
	"context"
	"log/slog"
)

// OrchestratorConfig chooses the handlers; a nil handler means the default
// one (NewBuildPhaseHandler(BuildOptions{}), and so on).
type OrchestratorConfig struct {
	// Build runs the agent. Default: NewBuildPhaseHandler(BuildOptions{}).
	Build BuildHandler
	// Snapshot records what the agent changed. Default:
	// NewSnapshotPhaseHandler(SnapshotOptions{}).
	Snapshot SnapshotHandler
	// Verify runs the gate plan. Default: NewVerifyPhaseHandler().
	Verify VerifyHandler
	// Feedback turns failed gates into the next prompt. Default:
	// NewFeedbackPhaseHandler().
	Feedback FeedbackHandler
}

// IterationInput is what one iteration needs beyond the context.
type IterationInput struct {
	TaskPrompt  string
	Feedback    string
	SessionID   string
	BeforeState BeforeState
	GatePlan    GatePlan
}

// IterationPhases holds the result of every phase that ran.
type IterationPhases struct {
	Build    *BuildPhaseResult    `json:"build,omitempty"`
	Snapshot *SnapshotPhaseResult `json:"snapshot,omitempty"`
	Verify   *VerifyPhaseResult   `json:"verify,omitempty"`
	Feedback *FeedbackPhaseResult `json:"feedback,omitempty"`
}

// IterationResult is the outcome of one iteration.
type IterationResult struct {
	// Success is true only when verification passed.
	Success bool            `json:"success"`
	Phases  IterationPhases `json:"phases"`
	// NextSessionID is the build's session id, to resume next iteration.
	NextSessionID string `json:"next_session_id,omitempty"`
	// NextFeedback is the feedback for the next iteration.
	NextFeedback string `json:"next_feedback,omitempty"`
	// ShouldContinue is true when another iteration may fix what failed.
	ShouldContinue bool `json:"should_continue"`
	// StateTransition is the event the iteration ended with.
	StateTransition RunEvent `json:"state_transition"`
	// Events are the events of the iteration in order, from BUILDING; the
	// last one is StateTransition.
	Events []RunEvent `json:"events"`
}

func (r *IterationResult) emit(event RunEvent) {
	r.Events = append(r.Events, event)
	r.StateTransition = event
}

// PhaseOrchestrator runs the phases of one iteration in order:
// build → snapshot → verify → feedback (only after a failed verification).
// It holds no per-run state and is safe for concurrent use when its
// handlers are.
type PhaseOrchestrator struct {
	build    BuildHandler
	snapshot SnapshotHandler
	verify   VerifyHandler
	feedback FeedbackHandler
}

// NewPhaseOrchestrator returns an orchestrator with cfg's handlers.
func NewPhaseOrchestrator(cfg OrchestratorConfig) *PhaseOrchestrator {
	o := &PhaseOrchestrator{build: cfg.Build, snapshot: cfg.Snapshot, verify: cfg.Verify, feedback: cfg.Feedback}
	if o.build == nil {
		o.build = NewBuildPhaseHandler(BuildOptions{})
	}
	if o.snapshot == nil {
		o.snapshot = NewSnapshotPhaseHandler(SnapshotOptions{})
	}
	if o.verify == nil {
		o.verify = NewVerifyPhaseHandler()
	}
	if o.feedback == nil {
		o.feedback = NewFeedbackPhaseHandler()
	}
	return o
}

// ExecuteIteration runs one iteration and says which event it ended with:
//
//   - build failed: BUILD_FAILED, nothing else runs;
//   - snapshot failed: SNAPSHOT_FAILED, nothing else runs;
//   - snapshot empty (and not allowed): NO_CHANGES, then the feedback phase
//     with the no-changes message; retryable;
//   - verifier could not produce a verdict: VERIFY_FAILED_TERMINAL (see
//     below), no feedback;
//   - verification passed: VERIFY_PASSED, no feedback;
//   - verification failed: feedback, then VERIFY_FAILED_RETRYABLE; retryable.
//
// A verifier error ends the run with VERIFY_FAILED_TERMINAL rather than
// SYSTEM_ERROR: the fault is located (the verify phase, whose error says
// what broke), there is no report to give the agent as feedback, and running
// the agent again cannot repair a broken gate. SYSTEM_ERROR is kept for
// faults of the run itself (its before state cannot be captured, its state
// machine is misused). If the context ended meanwhile, the RunLoop reports
// cancellation or the wall-clock limit instead.
//
// Every handler is given its own deep copy of pc and of the gate plan and
// before state in its input: what one handler changes in them, another
// never sees.
func (o *PhaseOrchestrator) ExecuteIteration(ctx context.Context, pc *PhaseContext, in IterationInput) IterationResult {
	res := IterationResult{StateTransition: EventSystemError, Events: make([]RunEvent, 0, 4)}
	log := pc.Services.logger()

	build := o.build.Execute(ctx, pc.clone(), BuildPhaseInput{TaskPrompt: in.TaskPrompt, Feedback: in.Feedback, SessionID: in.SessionID})
	res.Phases.Build = &build
	res.NextSessionID = build.SessionID
	if !build.Success {
		log.LogAttrs(ctx, slog.LevelInfo, "build phase failed, ending iteration",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration))
		res.emit(EventBuildFailed)
		return res
	}
	res.emit(EventBuildCompleted)

	snap := o.snapshot.Execute(ctx, pc.clone(), SnapshotPhaseInput{BeforeState: in.BeforeState.clone()})
	res.Phases.Snapshot = &snap
	switch {
	case snap.NoChanges && !snap.Success:
		res.emit(EventNoChanges)
		var snapshot Snapshot
		if snap.Snapshot != nil {
			snapshot = *snap.Snapshot
		}
		fb := o.feedback.Execute(ctx, pc.clone(), FeedbackPhaseInput{Snapshot: snapshot, GatePlan: in.GatePlan.clone(), NoChanges: true})
		res.Phases.Feedback = &fb
		res.NextFeedback = fb.Feedback
		res.ShouldContinue = true
		return res
	case !snap.Success || snap.Snapshot == nil:
		log.LogAttrs(ctx, slog.LevelInfo, "snapshot phase failed, ending iteration",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration))
		res.emit(EventSnapshotFailed)
		return res
	}
	res.emit(EventSnapshotCompleted)

	verify := o.verify.Execute(ctx, pc.clone(), VerifyPhaseInput{Snapshot: *snap.Snapshot, GatePlan: in.GatePlan.clone()})
	res.Phases.Verify = &verify
	if verify.Success && verify.AllPassed {
		res.Success = true
		res.emit(EventVerifyPassed)
		return res
	}
	if !verify.Success || verify.Report == nil {
		res.emit(EventVerifyFailedTerminal)
		return res
	}

	fb := o.feedback.Execute(ctx, pc.clone(), FeedbackPhaseInput{
		Snapshot: *snap.Snapshot, VerificationReport: *verify.Report, GatePlan: in.GatePlan.clone(),
	})
	res.Phases.Feedback = &fb
	res.NextFeedback = fb.Feedback
	res.ShouldContinue = true
	res.emit(EventVerifyFailedRetryable)
	return res
}
