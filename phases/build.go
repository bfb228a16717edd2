package phases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
)

// BuildPhaseInput is what one build needs beyond the context.
type BuildPhaseInput struct {
	TaskPrompt string
	// Feedback from the previous iteration; empty on the first.
	Feedback string
	// SessionID resumes the agent's session; empty starts a new one.
	SessionID string
}

// BuildPhaseResult is the outcome of the build phase.
type BuildPhaseResult struct {
	PhaseResult
	// SessionID is the agent's session to resume next iteration: the one the
	// agent reported, else the one it was given.
	SessionID string `json:"session_id,omitempty"`
	// AgentResult is set whenever the agent ran, successfully or not.
	AgentResult *AgentResult `json:"agent_result,omitempty"`
	// BuildError classifies a failed build.
	BuildError *BuildError `json:"build_error,omitempty"`
}

// BuildErrorKind classifies a failed build.
type BuildErrorKind string

// Build error kinds. The first three come from an agent result, the last
// from an error returned by the AgentDriver.
const (
	BuildAgentFailure BuildErrorKind = "agent_failure" // non-zero exit or reported error
	BuildAgentTimeout BuildErrorKind = "agent_timeout" // the driver's timeout expired
	BuildAgentCrash   BuildErrorKind = "agent_crash"   // ended by a signal
	BuildSystemError  BuildErrorKind = "system_error"  // the driver could not run the agent
)

// BuildError is a classified build failure.
type BuildError struct {
	Kind      BuildErrorKind `json:"kind"`
	Message   string         `json:"message"`
	RunID     RunID          `json:"run_id"`
	Iteration int            `json:"iteration"`
	ExitCode  int            `json:"exit_code,omitempty"`
	Signal    string         `json:"signal,omitempty"`
	// Output is the tail of the agent's output, for diagnosis.
	Output string `json:"output,omitempty"`
	// Recoverable says whether running the agent again could help; a host
	// that retries builds consults it.
	Recoverable bool `json:"recoverable"`
	// Err is the driver's error for BuildSystemError.
	Err error `json:"-"`
}

func (e *BuildError) Error() string { return fmt.Sprintf("build %s: %s", e.Kind, e.Message) }

// Unwrap returns the driver's error, if any.
func (e *BuildError) Unwrap() error { return e.Err }

// buildErrorOutputLimit bounds BuildError.Output.
const buildErrorOutputLimit = 4 << 10

// BuildErrorFromAgentResult classifies a failed agent result.
func BuildErrorFromAgentResult(r AgentResult, runID RunID, iteration int) *BuildError {
	e := &BuildError{
		Kind: BuildAgentFailure, RunID: runID, Iteration: iteration,
		ExitCode: r.ExitCode, Signal: r.Signal, Recoverable: true,
		Output: tail(strings.TrimSpace(r.Output+"\n"+r.Stderr), buildErrorOutputLimit),
	}
	switch {
	case r.TimedOut:
		e.Kind = BuildAgentTimeout
		e.Message = "agent timed out"
	case r.Signal != "":
		e.Kind, e.Recoverable = BuildAgentCrash, false
		e.Message = "agent killed by signal " + r.Signal
	case r.Error != "":
		e.Message = "agent reported an error: " + r.Error
	default:
		e.Message = fmt.Sprintf("agent failed with exit code %d", r.ExitCode)
	}
	if last := lastLine(r.Stderr); last != "" && r.Error == "" {
		e.Message += ": " + last
	}
	return e
}

// BuildErrorFromSystemError classifies an error returned by the driver. A
// cancelled context is not recoverable; other faults may be.
func BuildErrorFromSystemError(err error, runID RunID, iteration int) *BuildError {
	return &BuildError{
		Kind: BuildSystemError, Message: err.Error(), RunID: runID, Iteration: iteration,
		Recoverable: !isContextError(err), Err: err,
	}
}

// BuildOptions configure a BuildPhaseHandler; the zero value is ready.
type BuildOptions struct {
	// Timeout caps one agent execution. The agent gets the smaller of this
	// and the run's remaining wall-clock time. Default: none (zero: no cap
	// of its own; the driver may still have one).
	Timeout time.Duration
}

// BuildPhaseHandler runs the agent once.
type BuildPhaseHandler struct{ opts BuildOptions }

// NewBuildPhaseHandler returns a build handler.
func NewBuildPhaseHandler(opts BuildOptions) *BuildPhaseHandler { return &BuildPhaseHandler{opts} }

// Name returns "build".
func (*BuildPhaseHandler) Name() string { return string(PhaseBuild) }

// Phase returns PhaseBuild.
func (*BuildPhaseHandler) Phase() Phase { return PhaseBuild }

// Validate requires a prompt, a workspace and an agent driver.
func (*BuildPhaseHandler) Validate(pc *PhaseContext, in BuildPhaseInput) error {
	v := validation{phase: PhaseBuild}
	v.check(strings.TrimSpace(in.TaskPrompt) != "", "task prompt is required")
	v.check(pc.WorkspacePath != "", "workspace path is required")
	v.check(pc.Services.AgentDriver != nil, "agent driver is required")
	return v.err()
}

// Execute runs the agent, persists its result (a persistence failure is
// logged and never fails the phase) and classifies a failure.
func (h *BuildPhaseHandler) Execute(ctx context.Context, pc *PhaseContext, in BuildPhaseInput) BuildPhaseResult {
	clk := pc.Services.clock()
	start := clk.Now()
	log := pc.Services.logger()
	log.LogAttrs(ctx, slog.LevelInfo, "build phase started", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.Bool("has_feedback", in.Feedback != ""),
		slog.Bool("has_session", in.SessionID != ""))

	if err := h.Validate(pc, in); err != nil {
		buildErr := BuildErrorFromSystemError(err, pc.RunID, pc.Iteration)
		buildErr.Recoverable = false // the same input fails the same way
		return BuildPhaseResult{
			PhaseResult: PhaseResult{Error: validationFailure(err), Duration: clk.Since(start)},
			SessionID:   in.SessionID,
			BuildError:  buildErr,
		}
	}

	req := AgentRequest{
		WorkspacePath: pc.WorkspacePath,
		TaskPrompt:    in.TaskPrompt,
		Feedback:      in.Feedback,
		SessionID:     in.SessionID,
		Iteration:     pc.Iteration,
		Timeout:       h.agentTimeout(pc.Run.Deadline, clk.Now()),
		Constraints:   pc.Task.Agent,
	}
	agentResult, err := pc.Services.AgentDriver.Execute(ctx, req, pc.Stream)
	if err != nil {
		log.LogAttrs(ctx, slog.LevelError, "build phase failed with exception",
			slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", err))
		return BuildPhaseResult{
			PhaseResult: PhaseResult{
				Error:    &PhaseError{Kind: ErrorException, Message: err.Error(), Err: err},
				Duration: clk.Since(start),
			},
			SessionID:  in.SessionID,
			BuildError: BuildErrorFromSystemError(err, pc.RunID, pc.Iteration),
		}
	}

	if pc.Services.ResultPersister != nil {
		if _, perr := pc.Services.ResultPersister.SaveAgentResult(ctx, pc.RunID, pc.Iteration, agentResult); perr != nil {
			log.LogAttrs(ctx, slog.LevelError, "failed to persist agent result",
				slog.String("run_id", string(pc.RunID)), slog.Int("iteration", pc.Iteration), slog.Any("error", perr))
		}
	}

	res := BuildPhaseResult{
		PhaseResult: PhaseResult{Success: agentResult.Success},
		SessionID:   agentResult.SessionID,
		AgentResult: &agentResult,
	}
	if res.SessionID == "" {
		res.SessionID = in.SessionID
	}
	if !agentResult.Success {
		res.BuildError = BuildErrorFromAgentResult(agentResult, pc.RunID, pc.Iteration)
		res.Error = &PhaseError{Kind: ErrorAgentFailed, Message: res.BuildError.Message}
	}
	res.Duration = clk.Since(start)
	log.LogAttrs(ctx, slog.LevelInfo, "build phase completed", slog.String("run_id", string(pc.RunID)),
		slog.Int("iteration", pc.Iteration), slog.Bool("success", res.Success), slog.Duration("duration", res.Duration))
	return res
}

// agentTimeout is the smaller of the handler's cap and the time left until
// the run's deadline; zero means neither applies. A passed deadline yields
// the smallest positive duration, never zero, because zero would mean "no
// limit" to the driver.
func (h *BuildPhaseHandler) agentTimeout(deadline, now time.Time) time.Duration {
	t := h.opts.Timeout
	if !deadline.IsZero() {
		left := max(deadline.Sub(now), time.Nanosecond)
		if t == 0 || left < t {
			t = left
		}
	}
	return t
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[len(s)-n:]
}

func lastLine(s string) string {
	s = strings.TrimSpace(s)
	if i := strings.LastIndexByte(s, '\n'); i >= 0 {
		s = s[i+1:]
	}
	return strings.TrimSpace(s)
}

func isContextError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
