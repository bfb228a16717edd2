package phases

import (
	"context"
	"log/slog"
	"strings"
)

// FeedbackPhaseInput is what feedback is generated from.
type FeedbackPhaseInput struct {
	Snapshot           Snapshot
	VerificationReport VerificationReport
	GatePlan           GatePlan
	// NoChanges asks for the "no changes detected" feedback instead of
	// feedback on a verification report (there is none: nothing was
	// verified because nothing changed).
	NoChanges bool
}

// FeedbackPhaseResult is the outcome of the feedback phase.
type FeedbackPhaseResult struct {
	PhaseResult
	Feedback string `json:"feedback,omitempty"`
}

// Metadata keys of FeedbackPhaseResult.
const (
	// MetadataFallback is true when the generator failed (or returned
	// nothing) and the fallback feedback was used.
	MetadataFallback = "fallback"
	// MetadataNoChanges is true when the feedback is the no-changes message.
	MetadataNoChanges = "noChanges"
)

// NoChangesFeedback is the feedback given to an agent whose iteration
// changed nothing.
const NoChangesFeedback = "No changes detected: the previous iteration produced no new commits and no " +
	"uncommitted changes in the workspace. Make the changes the task asks for and save them to disk " +
	"(committing is optional); an iteration without changes cannot pass verification."

// FeedbackPhaseHandler turns a failed verification into the next
// iteration's instructions.
type FeedbackPhaseHandler struct{}

// NewFeedbackPhaseHandler returns a feedback handler.
func NewFeedbackPhaseHandler() *FeedbackPhaseHandler { return &FeedbackPhaseHandler{} }

// Name returns "feedback".
func (*FeedbackPhaseHandler) Name() string { return string(PhaseFeedback) }

// Phase returns PhaseFeedback.
func (*FeedbackPhaseHandler) Phase() Phase { return PhaseFeedback }

// Execute asks the generator for feedback. It always succeeds: when the
// generator fails, returns nothing or is not configured, the result carries
// FallbackFeedback and metadata fallback=true.
func (h *FeedbackPhaseHandler) Execute(ctx context.Context, pc *PhaseContext, in FeedbackPhaseInput) FeedbackPhaseResult {
	clk := pc.Services.clock()
	start := clk.Now()
	log := pc.Services.logger()
	log.LogAttrs(ctx, slog.LevelInfo, "feedback phase started",
		slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration))

	if in.NoChanges {
		return FeedbackPhaseResult{
			PhaseResult: PhaseResult{Success: true, Duration: clk.Since(start), Metadata: map[string]any{MetadataNoChanges: true}},
			Feedback:    NoChangesFeedback,
		}
	}

	var feedback string
	var err error
	if gen := pc.Services.FeedbackGenerator; gen != nil {
		feedback, err = gen.Generate(ctx, in.Snapshot, in.VerificationReport, in.GatePlan,
			FeedbackOptions{RunID: pc.RunID, Iteration: pc.Iteration})
	}
	if err != nil || strings.TrimSpace(feedback) == "" {
		log.LogAttrs(ctx, slog.LevelError, "feedback generation failed; using fallback",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", err))
		return FeedbackPhaseResult{
			PhaseResult: PhaseResult{Success: true, Duration: clk.Since(start), Metadata: map[string]any{MetadataFallback: true}},
			Feedback:    FallbackFeedback(in.VerificationReport),
		}
	}
	log.LogAttrs(ctx, slog.LevelInfo, "feedback generated", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.Int("feedback_length", len(feedback)))
	return FeedbackPhaseResult{PhaseResult: PhaseResult{Success: true, Duration: clk.Since(start)}, Feedback: feedback}
}

// FallbackFeedback is the feedback used when generation fails: one line per
// failed level, naming its failed checks. Levels that were skipped because
// an earlier level failed are not listed: they did not fail.
func FallbackFeedback(report VerificationReport) string {
	var b strings.Builder
	b.WriteString("Verification failed. Please review and fix:")
	listed := 0
	for _, lr := range report.Levels {
		if lr.Passed || lr.Skipped {
			continue
		}
		listed++
		b.WriteString("\n- ")
		b.WriteString(levelFailureLine(lr.Level))
		var names []string
		for _, c := range lr.Checks {
			if !c.Passed {
				names = append(names, c.Name)
			}
		}
		if len(names) > 0 {
			b.WriteString(" (failed: ")
			b.WriteString(strings.Join(names, ", "))
			b.WriteString(")")
		}
	}
	if listed == 0 {
		b.WriteString("\n- No failed level was recorded; run the gate plan's checks yourself and fix what fails")
	}
	return b.String()
}

func levelFailureLine(l Level) string {
	switch l {
	case L0Contracts:
		return "L0 (Contracts): Type errors or lint issues detected"
	case L1Tests:
		return "L1 (Tests): Unit tests failed"
	case L2BlackBox:
		return "L2 (Blackbox): Integration tests failed"
	case L3CI:
		return "L3 (CI): CI checks failed"
	}
	return string(l) + ": checks failed"
}
