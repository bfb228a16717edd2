package phases

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
)

// Phase names one step of an iteration.
type Phase string

// The four phases of an iteration, in order.
const (
	PhaseBuild    Phase = "build"
	PhaseSnapshot Phase = "snapshot"
	PhaseVerify   Phase = "verify"
	PhaseFeedback Phase = "feedback"
)

// TaskSpec is what a run is asked to do and within which limits.
type TaskSpec struct {
	// Prompt is the task given to the agent on every iteration.
	Prompt string
	// GatePlan is how each iteration's change is verified.
	GatePlan GatePlan
	// SkipVerification waives the gates: the verifier reports a pass without
	// running checks and says so in its report.
	SkipVerification bool
	// Limits bound the run. A zero field falls back to the RunLoop's
	// Config.Limits and then to the documented default.
	Limits Limits
	// Agent is passed through to the AgentDriver.
	Agent AgentConstraints
}

// RunView is a read-only copy of the run's state at the start of a phase.
// It is a value without references, so a handler that modifies its copy
// changes nothing in the run.
type RunView struct {
	ItemID        foreman.ItemID
	RunID         RunID
	State         RunState
	Iteration     int
	MaxIterations int
	StartedAt     time.Time
	// Deadline is when the run's wall-clock budget ends, measured on the
	// run's clock; zero means no wall-clock limit.
	Deadline  time.Time
	SessionID string
	// Tokens and CostUSD are what earlier iterations spent.
	Tokens  TokenUsage
	CostUSD float64
}

// PhaseContext is everything a phase handler may use. Handlers treat it as
// read-only; even so, every handler call gets its own deep copy (slices
// included), so a handler that modifies it changes nothing for the next
// handler or iteration.
type PhaseContext struct {
	ItemID        foreman.ItemID
	RunID         RunID
	Iteration     int
	Task          TaskSpec
	WorkspacePath string
	// Run is a value copy of the run (see RunView).
	Run         RunView
	BeforeState BeforeState
	Services    PhaseServices
	// Stream, when non-nil, receives the agent's output as it happens.
	Stream StreamCallback
}

// PhaseServices are the dependencies injected into every handler.
type PhaseServices struct {
	AgentDriver       AgentDriver
	Snapshotter       Snapshotter
	Verifier          Verifier
	FeedbackGenerator FeedbackGenerator
	// ResultPersister may be nil: results are then not persisted.
	ResultPersister ResultPersister
	// Logger may be nil: logs are then discarded.
	Logger *slog.Logger
	// Clock times the phases; nil means the wall clock.
	Clock foreman.Clock
}

func (s PhaseServices) logger() *slog.Logger {
	if s.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return s.Logger
}

func (s PhaseServices) clock() foreman.Clock { return clock.OrReal(s.Clock) }

// ErrorKind classifies a failed phase.
type ErrorKind string

// Phase error kinds.
const (
	// ErrorValidation: the handler's input or context failed validation; no
	// service was called.
	ErrorValidation ErrorKind = "validation_failed"
	// ErrorException: a service returned an error (a system fault).
	ErrorException ErrorKind = "exception"
	// ErrorAgentFailed: the agent ran but reported failure.
	ErrorAgentFailed ErrorKind = "agent_failed"
	// ErrorSnapshotFailed: the snapshotter could not record the workspace.
	ErrorSnapshotFailed ErrorKind = "snapshot_failed"
	// ErrorNoChanges: the snapshot shows no change at all.
	ErrorNoChanges ErrorKind = "no_changes"
	// ErrorVerificationException: the verifier could not produce a verdict.
	ErrorVerificationException ErrorKind = "verification_exception"
)

// PhaseError describes why a phase did not succeed.
type PhaseError struct {
	Kind    ErrorKind      `json:"kind"`
	Message string         `json:"message"`
	Details map[string]any `json:"details,omitempty"`
	// Err is the underlying error, when there is one.
	Err error `json:"-"`
}

func (e *PhaseError) Error() string { return fmt.Sprintf("%s: %s", e.Kind, e.Message) }

// Unwrap returns the underlying error.
func (e *PhaseError) Unwrap() error { return e.Err }

// PhaseResult is the part every phase's result shares.
type PhaseResult struct {
	Success bool `json:"success"`
	// Error is set whenever Success is false.
	Error    *PhaseError    `json:"error,omitempty"`
	Duration time.Duration  `json:"duration"`
	Metadata map[string]any `json:"metadata,omitempty"`
}

// PhaseHandler is the shape every phase handler has. It is generic for
// documentation and compile-time checks only; the orchestrator depends on
// the non-generic BuildHandler, SnapshotHandler, VerifyHandler and
// FeedbackHandler so that they can be mocked.
//
// Execute never returns an error: a failure of the phase is a field of Out.
type PhaseHandler[In, Out any] interface {
	Name() string
	Phase() Phase
	Execute(ctx context.Context, pc *PhaseContext, in In) Out
}

// Validator is implemented by handlers that check their input before doing
// anything. A failed validation makes Execute return an unsuccessful result
// with an Error of kind ErrorValidation wrapping a *ValidationError.
type Validator[In any] interface {
	Validate(pc *PhaseContext, in In) error
}

// ValidationError lists every problem found in a handler's input.
type ValidationError struct {
	Phase    Phase
	Problems []string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("phases: invalid %s input: %s", e.Phase, strings.Join(e.Problems, "; "))
}

// validation collects problems; err returns nil when there are none.
type validation struct {
	phase    Phase
	problems []string
}

func (v *validation) check(ok bool, problem string) {
	if !ok {
		v.problems = append(v.problems, problem)
	}
}

func (v *validation) err() error {
	if len(v.problems) == 0 {
		return nil
	}
	return &ValidationError{Phase: v.phase, Problems: v.problems}
}

func validationFailure(err error) *PhaseError {
	return &PhaseError{Kind: ErrorValidation, Message: err.Error(), Err: err}
}

// BuildHandler runs the build phase.
type BuildHandler interface {
	Name() string
	Phase() Phase
	Execute(ctx context.Context, pc *PhaseContext, in BuildPhaseInput) BuildPhaseResult
}

// SnapshotHandler runs the snapshot phase.
type SnapshotHandler interface {
	Name() string
	Phase() Phase
	Execute(ctx context.Context, pc *PhaseContext, in SnapshotPhaseInput) SnapshotPhaseResult
}

// VerifyHandler runs the verify phase.
type VerifyHandler interface {
	Name() string
	Phase() Phase
	Execute(ctx context.Context, pc *PhaseContext, in VerifyPhaseInput) VerifyPhaseResult
}

// FeedbackHandler runs the feedback phase.
type FeedbackHandler interface {
	Name() string
	Phase() Phase
	Execute(ctx context.Context, pc *PhaseContext, in FeedbackPhaseInput) FeedbackPhaseResult
}

// Compile-time proof that the concrete handlers have both shapes.
var (
	_ PhaseHandler[BuildPhaseInput, BuildPhaseResult]       = (*BuildPhaseHandler)(nil)
	_ PhaseHandler[SnapshotPhaseInput, SnapshotPhaseResult] = (*SnapshotPhaseHandler)(nil)
	_ PhaseHandler[VerifyPhaseInput, VerifyPhaseResult]     = (*VerifyPhaseHandler)(nil)
	_ PhaseHandler[FeedbackPhaseInput, FeedbackPhaseResult] = (*FeedbackPhaseHandler)(nil)
	_ Validator[BuildPhaseInput]                            = (*BuildPhaseHandler)(nil)
	_ Validator[SnapshotPhaseInput]                         = (*SnapshotPhaseHandler)(nil)
	_ Validator[VerifyPhaseInput]                           = (*VerifyPhaseHandler)(nil)
	_ BuildHandler                                          = (*BuildPhaseHandler)(nil)
	_ SnapshotHandler                                       = (*SnapshotPhaseHandler)(nil)
	_ VerifyHandler                                         = (*VerifyPhaseHandler)(nil)
	_ FeedbackHandler                                       = (*FeedbackPhaseHandler)(nil)
)
