package phases

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/ids"
)

// ErrWallClockExceeded is the cause (context.Cause) of a run context ended
// by Limits.MaxWallClock, whichever clock measured it.
var ErrWallClockExceeded = errors.New("phases: run wall-clock limit exceeded")

// Config configures a RunLoop. The zero value of every field means its
// documented default.
type Config struct {
	// Services are given to the handlers. Services.Logger (nil: discard) and
	// Services.Clock (nil: wall clock) are also the run loop's own. With the
	// default handlers, AgentDriver, Snapshotter and Verifier are required
	// (Run reports a missing one as an error before anything runs; Verifier
	// may be nil when the task sets SkipVerification); FeedbackGenerator nil
	// means the fallback feedback; ResultPersister nil means no persistence.
	// Required.
	Services PhaseServices
	// Handlers replaces phase handlers; nil ones are the defaults. Default:
	// the default handlers (see OrchestratorConfig).
	Handlers OrchestratorConfig
	// Limits apply to every run whose TaskSpec.Limits leaves a field zero.
	// Default: the defaults Limits documents (3 iterations, no wall-clock,
	// token or cost limit).
	Limits Limits
	// Cleanup, when set, is called once at the end of every run, whatever
	// its final state (CANCELED included), with a context that is not
	// cancelled; release the workspace or kill leftovers here. Its error is
	// logged. Default: none (nil: nothing is called).
	Cleanup func(ctx context.Context, result RunResult) error
	// OnTransition, when set, receives every state transition of every run,
	// synchronously; it must not block. Default: none (nil: not called).
	OnTransition func(TransitionEvent)
}

// TransitionEvent is one state transition of a run, for logging and metrics.
type TransitionEvent struct {
	ItemID    foreman.ItemID
	RunID     RunID
	Iteration int
	Transition
	At time.Time
	// Reason is set on the transition into a terminal state.
	Reason Reason
}

// RunRequest describes one run.
type RunRequest struct {
	ItemID foreman.ItemID
	// RunID names the run (it becomes a directory name for FilePersister);
	// empty means "<item id>-<start time>".
	RunID         RunID
	WorkspacePath string
	Task          TaskSpec
	// BeforeState, when set, is the starting point snapshots are measured
	// from (for example the assignment's base); nil means capture it with
	// Snapshotter.Before when the run starts.
	BeforeState *BeforeState
	// SessionID resumes an agent session on the first iteration.
	SessionID string
	// Stream receives the agent's output as it happens.
	Stream StreamCallback
}

// IterationRecord is one iteration of a run.
type IterationRecord struct {
	Iteration int             `json:"iteration"`
	StartedAt time.Time       `json:"started_at"`
	Duration  time.Duration   `json:"duration"`
	Result    IterationResult `json:"result"`
	// DiffKey and FailureKey are what loop detection compared.
	DiffKey    string `json:"diff_key,omitempty"`
	FailureKey string `json:"failure_key,omitempty"`
}

// RunResult is everything a run did and how it ended.
type RunResult struct {
	ItemID        foreman.ItemID `json:"item_id"`
	RunID         RunID          `json:"run_id"`
	WorkspacePath string         `json:"workspace_path"`
	// State is the final state; FinalEvent the event that led to it.
	State      RunState `json:"state"`
	FinalEvent RunEvent `json:"final_event"`
	Outcome    Outcome  `json:"outcome"`
	Reason     Reason   `json:"reason"`
	// Message explains the reason in words.
	Message     string            `json:"message,omitempty"`
	Limits      Limits            `json:"limits"`
	BeforeState BeforeState       `json:"before_state"`
	Iterations  []IterationRecord `json:"iterations"`
	// States are the states visited, in order, starting with QUEUED.
	States      []RunState    `json:"states"`
	Transitions []Transition  `json:"transitions"`
	SessionID   string        `json:"session_id,omitempty"`
	Tokens      TokenUsage    `json:"tokens"`
	CostUSD     float64       `json:"cost_usd"`
	StartedAt   time.Time     `json:"started_at"`
	FinishedAt  time.Time     `json:"finished_at"`
	Duration    time.Duration `json:"duration"`
	// Err is the system fault behind a SYSTEM_ERROR (also returned by Run).
	Err          error  `json:"-"`
	ErrorMessage string `json:"error,omitempty"`
}

// Succeeded reports whether the run ended SUCCEEDED.
func (r RunResult) Succeeded() bool { return r.State == StateSucceeded }

// RunLoop drives runs: QUEUED → LEASED → (BUILDING → SNAPSHOTTING →
// VERIFYING → FEEDBACK)* → SUCCEEDED | FAILED | CANCELED, every step
// through the transition table. It holds no per-run state; concurrent runs
// are safe when the services are.
type RunLoop struct {
	cfg  Config
	orch *PhaseOrchestrator
}

// NewRunLoop returns a run loop.
func NewRunLoop(cfg Config) *RunLoop {
	return &RunLoop{cfg: cfg, orch: NewPhaseOrchestrator(cfg.Handlers)}
}

// Run executes one run until verification passes or a limit ends it.
//
// It returns an error without running anything when req is invalid. Once
// the run has started, every ending is a RunResult: build or snapshot
// failure, limits, loop detection and cancellation (CANCELED) are
// outcomes, not errors. Only a system fault (the before state cannot be
// captured, a transition is refused) is also returned as an error, with
// the run FAILED through SYSTEM_ERROR.
func (l *RunLoop) Run(ctx context.Context, req RunRequest) (RunResult, error) {
	if err := l.validate(req); err != nil {
		return RunResult{}, err
	}
	r := newRun(l, req)
	return r.execute(ctx)
}

func (l *RunLoop) validate(req RunRequest) error {
	if err := req.ItemID.Validate(); err != nil {
		return fmt.Errorf("phases: run request: %w", err)
	}
	if req.RunID != "" {
		if err := ids.Validate("run", string(req.RunID)); err != nil {
			return fmt.Errorf("phases: run request: %w", err)
		}
	}
	if req.WorkspacePath == "" {
		return errors.New("phases: run request: workspace path is required")
	}
	if req.BeforeState == nil && l.cfg.Services.Snapshotter == nil {
		return errors.New("phases: run request: no before state and no snapshotter to capture one")
	}
	// The default handlers cannot work without these services; a missing
	// one is a configuration fault, reported before anything runs rather
	// than as a failed first phase that looks like an agent failure.
	s := l.cfg.Services
	switch {
	case l.cfg.Handlers.Build == nil && s.AgentDriver == nil:
		return errors.New("phases: Config.Services.AgentDriver is required")
	case l.cfg.Handlers.Snapshot == nil && s.Snapshotter == nil:
		return errors.New("phases: Config.Services.Snapshotter is required")
	case l.cfg.Handlers.Verify == nil && s.Verifier == nil && !req.Task.SkipVerification:
		return errors.New("phases: Config.Services.Verifier is required (or set TaskSpec.SkipVerification)")
	}
	return nil
}

// run is the state of one Run call.
type run struct {
	loop     *RunLoop
	req      RunRequest
	services PhaseServices
	log      *slog.Logger
	m        *machine
	res      RunResult
	limits   Limits
	deadline time.Time
	feedback string
	diffs    repeatCounter
	failures repeatCounter
}

func newRun(l *RunLoop, req RunRequest) *run {
	s := l.cfg.Services
	s.Clock = s.clock()
	s.Logger = s.logger()
	now := s.Clock.Now()
	if req.RunID == "" {
		item := string(req.ItemID)
		if len(item) > 50 {
			item = item[:50]
		}
		req.RunID = RunID(item + "-" + strconv.FormatInt(now.UnixNano(), 36))
	}
	limits := req.Task.Limits.orElse(l.cfg.Limits).resolved()
	// The run keeps its own copy of the caller's slices.
	req.Task = req.Task.clone()
	req.Task.Limits = limits
	if req.BeforeState != nil {
		before := req.BeforeState.clone()
		req.BeforeState = &before
	}
	return &run{
		loop: l, req: req, services: s, log: s.Logger, m: newMachine(), limits: limits,
		res: RunResult{
			ItemID: req.ItemID, RunID: req.RunID, WorkspacePath: req.WorkspacePath,
			Limits: limits, SessionID: req.SessionID, StartedAt: now,
		},
	}
}

func (r *run) execute(ctx context.Context) (RunResult, error) {
	runCtx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	if d := r.limits.MaxWallClock; d > 0 {
		r.deadline = r.res.StartedAt.Add(d)
		if r.services.Clock == clock.Real() {
			// A real deadline, so that services see it in ctx.Deadline().
			var cancelDeadline context.CancelFunc
			runCtx, cancelDeadline = context.WithDeadlineCause(runCtx, r.deadline, ErrWallClockExceeded)
			defer cancelDeadline()
		} else {
			// The context package only knows the wall clock: on an injected
			// clock the limit is a timer on that clock that cancels the run.
			timer := r.services.Clock.AfterFunc(d, func() { cancel(ErrWallClockExceeded) })
			defer timer.Stop()
		}
	}
	// Records, cleanup and the run file are written even when the run's
	// context has ended.
	bg := context.WithoutCancel(ctx)

	if ev, reason, ended := contextEnd(runCtx); ended {
		return r.end(bg, ev, reason, context.Cause(runCtx).Error(), nil)
	}
	if err := r.fire(EventWorkspaceAcquired, ""); err != nil {
		return r.systemError(bg, err)
	}
	if r.req.BeforeState != nil {
		r.res.BeforeState = *r.req.BeforeState
	} else {
		before, err := r.services.Snapshotter.Before(runCtx, r.req.WorkspacePath)
		if err != nil {
			if ev, reason, ended := contextEnd(runCtx); ended {
				return r.end(bg, ev, reason, context.Cause(runCtx).Error(), nil)
			}
			return r.systemError(bg, fmt.Errorf("phases: capture before state: %w", err))
		}
		r.res.BeforeState = before
	}
	if ev, reason, ended := contextEnd(runCtx); ended {
		return r.end(bg, ev, reason, context.Cause(runCtx).Error(), nil)
	}
	if err := r.fire(EventBuildStarted, ""); err != nil {
		return r.systemError(bg, err)
	}

	for {
		if err := r.m.startBuild(); err != nil {
			return r.systemError(bg, err)
		}
		rec := r.iterate(runCtx)
		r.persistIteration(bg, rec)

		ctxEvent, ctxReason, ended := contextEnd(runCtx)
		events := rec.Result.Events
		if ended && isFailureEvent(rec.Result.StateTransition) {
			// The phase failed because the run's context ended: report
			// the cancellation or the limit, not the phase.
			events = events[:len(events)-1]
		}
		for _, ev := range events {
			if err := r.fire(ev, ""); err != nil {
				return r.systemError(bg, err)
			}
		}
		if r.m.state.Terminal() {
			return r.end(bg, "", "", phaseMessage(rec.Result), nil)
		}
		if ended {
			return r.end(bg, ctxEvent, ctxReason, context.Cause(runCtx).Error(), nil)
		}
		if reason, msg := r.limitReached(rec); reason != "" {
			return r.end(bg, EventLimitExceeded, reason, msg, nil)
		}
		r.feedback = rec.Result.NextFeedback
		if err := r.fire(EventFeedbackGenerated, ""); err != nil {
			return r.systemError(bg, err)
		}
	}
}

// iterate runs the orchestrator for the current iteration and accounts for
// what it spent.
func (r *run) iterate(ctx context.Context) IterationRecord {
	clk := r.services.Clock
	it := r.m.iteration
	// Each iteration starts from fresh copies; the orchestrator copies again
	// for every handler call.
	pc := &PhaseContext{
		ItemID: r.req.ItemID, RunID: r.req.RunID, Iteration: it, Task: r.req.Task.clone(),
		WorkspacePath: r.req.WorkspacePath, BeforeState: r.res.BeforeState.clone(),
		Services: r.services, Stream: r.req.Stream,
		Run: RunView{
			ItemID: r.req.ItemID, RunID: r.req.RunID, State: r.m.state, Iteration: it,
			MaxIterations: r.limits.MaxIterations, StartedAt: r.res.StartedAt, Deadline: r.deadline,
			SessionID: r.res.SessionID, Tokens: r.res.Tokens, CostUSD: r.res.CostUSD,
		},
	}
	start := clk.Now()
	result := r.loop.orch.ExecuteIteration(ctx, pc, IterationInput{
		TaskPrompt: r.req.Task.Prompt, Feedback: r.feedback, SessionID: r.res.SessionID,
		BeforeState: r.res.BeforeState.clone(), GatePlan: r.req.Task.GatePlan.clone(),
	})
	rec := IterationRecord{Iteration: it, StartedAt: start, Duration: clk.Since(start), Result: result,
		DiffKey: diffKey(result), FailureKey: failureKey(result)}
	if result.NextSessionID != "" {
		r.res.SessionID = result.NextSessionID
	}
	if b := result.Phases.Build; b != nil && b.AgentResult != nil {
		r.res.Tokens = r.res.Tokens.Add(b.AgentResult.Tokens)
		r.res.CostUSD += b.AgentResult.CostUSD
	}
	r.res.Iterations = append(r.res.Iterations, rec)
	return rec
}

func (r *run) fire(event RunEvent, reason Reason) error {
	t, err := r.m.fire(event)
	if err != nil {
		return err
	}
	r.res.Transitions = append(r.res.Transitions, t)
	if reason == "" && t.To.Terminal() {
		_, reason, _ = OutcomeForEvent(event)
	}
	if r.log.Enabled(context.Background(), slog.LevelDebug) {
		r.log.Debug("run transition", "run_id", r.req.RunID, "iteration", r.m.iteration,
			"from", t.From, "event", t.Event, "to", t.To)
	}
	if hook := r.loop.cfg.OnTransition; hook != nil {
		hook(TransitionEvent{ItemID: r.req.ItemID, RunID: r.req.RunID, Iteration: r.m.iteration,
			Transition: t, At: r.services.Clock.Now(), Reason: reason})
	}
	return nil
}

// systemError ends the run with SYSTEM_ERROR and returns err with it.
func (r *run) systemError(ctx context.Context, err error) (RunResult, error) {
	return r.end(ctx, EventSystemError, ReasonSystemError, err.Error(), err)
}

// end fires event (unless empty: the run is already terminal), completes
// the result, runs the cleanup hook and persists the run.
func (r *run) end(ctx context.Context, event RunEvent, reason Reason, msg string, cause error) (RunResult, error) {
	if event != "" {
		if reason == "" {
			_, reason, _ = OutcomeForEvent(event)
		}
		if err := r.fire(event, reason); err != nil {
			// Only a broken table gets here; report it rather than loop.
			cause = errors.Join(cause, err)
		}
	}
	last := r.res.Transitions[len(r.res.Transitions)-1]
	outcome, defaultReason, _ := OutcomeForEvent(last.Event)
	if reason == "" {
		reason = defaultReason
	}
	clk := r.services.Clock
	r.res.State, r.res.FinalEvent, r.res.Outcome, r.res.Reason, r.res.Message = r.m.state, last.Event, outcome, reason, msg
	r.res.States = r.m.visited
	r.res.FinishedAt = clk.Now()
	r.res.Duration = r.res.FinishedAt.Sub(r.res.StartedAt)
	if cause != nil {
		r.res.Err, r.res.ErrorMessage = cause, cause.Error()
	}
	if cleanup := r.loop.cfg.Cleanup; cleanup != nil {
		if err := cleanup(ctx, r.res); err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "run cleanup failed",
				slog.String("run_id", string(r.req.RunID)), slog.Any("error", err))
		}
	}
	if p := r.services.ResultPersister; p != nil {
		if _, err := p.SaveRun(ctx, r.res); err != nil {
			r.log.LogAttrs(ctx, slog.LevelError, "failed to persist run",
				slog.String("run_id", string(r.req.RunID)), slog.Any("error", err))
		}
	}
	r.log.LogAttrs(ctx, slog.LevelInfo, "run finished", slog.String("run_id", string(r.req.RunID)),
		slog.String("state", string(r.res.State)), slog.String("reason", string(r.res.Reason)),
		slog.Int("iterations", len(r.res.Iterations)))
	return r.res, cause
}

func (r *run) persistIteration(ctx context.Context, rec IterationRecord) {
	p := r.services.ResultPersister
	if p == nil {
		return
	}
	if _, err := p.SaveIteration(ctx, r.req.RunID, rec); err != nil {
		r.log.LogAttrs(ctx, slog.LevelError, "failed to persist iteration",
			slog.String("run_id", string(r.req.RunID)), slog.Int("iteration", rec.Iteration), slog.Any("error", err))
	}
}
