package phases

import (
	"context"
	"log/slog"
)

// VerifyPhaseInput is the change to verify and how.
type VerifyPhaseInput struct {
	Snapshot Snapshot
	GatePlan GatePlan
}

// VerifyPhaseResult is the outcome of the verify phase. Success means the
// verifier produced a report; AllPassed means the report is a pass.
type VerifyPhaseResult struct {
	PhaseResult
	Report    *VerificationReport `json:"report,omitempty"`
	AllPassed bool                `json:"all_passed"`
}

// MetadataLevelsRun is the VerifyPhaseResult metadata key listing the levels
// that ran at least one check ([]Level).
const MetadataLevelsRun = "levelsRun"

// VerifyPhaseHandler runs the gate plan.
type VerifyPhaseHandler struct{}

// NewVerifyPhaseHandler returns a verify handler.
func NewVerifyPhaseHandler() *VerifyPhaseHandler { return &VerifyPhaseHandler{} }

// Name returns "verify".
func (*VerifyPhaseHandler) Name() string { return string(PhaseVerify) }

// Phase returns PhaseVerify.
func (*VerifyPhaseHandler) Phase() Phase { return PhaseVerify }

// Validate requires a verifier and, unless verification is waived, a plan
// with at least one check: a plan without checks would pass anything.
func (*VerifyPhaseHandler) Validate(pc *PhaseContext, in VerifyPhaseInput) error {
	v := validation{phase: PhaseVerify}
	v.check(pc.Services.Verifier != nil, "verifier is required")
	checks := 0
	for _, l := range in.GatePlan.Levels {
		checks += len(l.Checks)
	}
	v.check(checks > 0 || pc.Task.SkipVerification, "gate plan has no checks (set SkipVerification to waive the gates)")
	return v.err()
}

// Execute runs the verifier and persists its report (a persistence failure
// is logged and never fails the phase). A verifier error yields
// ErrorVerificationException.
func (h *VerifyPhaseHandler) Execute(ctx context.Context, pc *PhaseContext, in VerifyPhaseInput) VerifyPhaseResult {
	clk := pc.Services.clock()
	start := clk.Now()
	log := pc.Services.logger()
	gates := 0
	for _, l := range in.GatePlan.Levels {
		gates += len(l.Checks)
	}
	log.LogAttrs(ctx, slog.LevelInfo, "verify phase started", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.Int("gate_count", gates))

	if err := h.Validate(pc, in); err != nil {
		return VerifyPhaseResult{PhaseResult: PhaseResult{Error: validationFailure(err), Duration: clk.Since(start)}}
	}

	opts := VerifyOptions{RunID: pc.RunID, Iteration: pc.Iteration, Skip: pc.Task.SkipVerification}
	report, err := pc.Services.Verifier.Verify(ctx, in.Snapshot, in.GatePlan, opts)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "verify phase failed",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", err))
		return VerifyPhaseResult{PhaseResult: PhaseResult{
			Error:    &PhaseError{Kind: ErrorVerificationException, Message: err.Error(), Err: err},
			Duration: clk.Since(start),
		}}
	}

	if pc.Services.ResultPersister != nil {
		if _, perr := pc.Services.ResultPersister.SaveVerificationReport(ctx, pc.RunID, pc.Iteration, report); perr != nil {
			log.LogAttrs(ctx, slog.LevelError, "failed to persist verification report",
				slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", perr))
		}
	}

	log.LogAttrs(ctx, slog.LevelInfo, "verification complete", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.Bool("passed", report.Passed))
	return VerifyPhaseResult{
		PhaseResult: PhaseResult{
			Success:  true,
			Duration: clk.Since(start),
			Metadata: map[string]any{MetadataLevelsRun: levelsRun(report)},
		},
		Report:    &report,
		AllPassed: report.Passed,
	}
}

// levelsRun lists the levels of report that ran at least one check.
func levelsRun(report VerificationReport) []Level {
	levels := make([]Level, 0, len(report.Levels))
	for _, lr := range report.Levels {
		if len(lr.Checks) > 0 {
			levels = append(levels, lr.Level)
		}
	}
	return levels
}
