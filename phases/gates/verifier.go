package gates

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
)

// CIChecker reports the state of external CI for a snapshot: the L3 level.
// An implementation typically pushes or looks up the snapshot's HeadCommit
// and waits for the CI system's verdict. A returned error means CI could not
// be asked (a system fault); failing CI is a LevelResult with Passed false.
type CIChecker interface {
	Check(ctx context.Context, snapshot phases.Snapshot) (phases.LevelResult, error)
}

// Defaults for VerifierConfig's zero values.
const (
	DefaultCheckTimeout = 10 * time.Minute
	DefaultOutputLimit  = 64 << 10
	DefaultWaitDelay    = 5 * time.Second
)

// VerifierConfig configures a Verifier. The zero value is ready to use.
type VerifierConfig struct {
	// DefaultTimeout applies to checks without their own Timeout. Default:
	// 10 min (DefaultCheckTimeout).
	DefaultTimeout time.Duration
	// OutputLimit bounds the output kept per check, in bytes (head and tail
	// halves plus a marker line). Default: 64 KiB (DefaultOutputLimit).
	OutputLimit int
	// CI answers for the L3 level. Default: none (nil: a plan's L3 level
	// must have commands of its own).
	CI CIChecker
	// Parallelism is how many checks of one level may run at once; zero or
	// one runs them one after another, in plan order. Default: 1.
	Parallelism int
	// Env is added to every check's environment, after the verifier's own;
	// GateCheck.Env comes after it. Default: none.
	Env []string
	// WaitDelay bounds how long a killed check may hold its output open
	// (a grandchild that left the process group). Default: 5 s
	// (DefaultWaitDelay).
	WaitDelay time.Duration
	// Clock measures timeouts and durations. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives a debug record per check. Default: none (nil discards
	// them).
	Logger *slog.Logger
	// Sandbox contains each check's processes: the check runs what its
	// Contain returns, in the environment it builds, and what it refused
	// of the check's is the result's Refused. Default: none (nil: checks
	// run on the host, with the host's whole environment and its rights).
	Sandbox Sandbox
}

// Verifier is the command-running phases.Verifier.
type Verifier struct {
	defaultTimeout time.Duration
	outputLimit    int
	ci             CIChecker
	parallelism    int
	env            []string
	waitDelay      time.Duration
	clock          clock.Clock
	log            *slog.Logger
	sandbox        Sandbox
}

var _ phases.Verifier = (*Verifier)(nil)

// NewVerifier returns a Verifier configured by cfg.
func NewVerifier(cfg VerifierConfig) *Verifier {
	v := &Verifier{
		defaultTimeout: orDefault(cfg.DefaultTimeout, DefaultCheckTimeout),
		outputLimit:    orDefault(cfg.OutputLimit, DefaultOutputLimit),
		ci:             cfg.CI,
		parallelism:    max(cfg.Parallelism, 1),
		env:            slices.Clone(cfg.Env),
		waitDelay:      orDefault(cfg.WaitDelay, DefaultWaitDelay),
		clock:          clock.OrReal(cfg.Clock),
		log:            cfg.Logger,
		sandbox:        cfg.Sandbox,
	}
	if v.log == nil {
		v.log = slog.New(slog.DiscardHandler)
	}
	return v
}

// orDefault returns v, or def when v is not positive.
func orDefault[T int | time.Duration](v, def T) T {
	if v <= 0 {
		return def
	}
	return v
}

// ErrInvalidPlan is matched (errors.Is) by every *PlanError.
var ErrInvalidPlan = errors.New("gates: invalid gate plan")

// ErrNoCIChecker is the cause of a PlanError for an L3 level that has no
// commands while the Verifier has no CIChecker.
var ErrNoCIChecker = errors.New("gates: L3 level has no commands and no CIChecker is configured")

// ErrEmptyPlan is the cause of a PlanError for a plan with no check at all
// (no levels, or levels without commands and no L3 level for a configured
// CIChecker): it would pass any change, so the Verifier refuses it rather
// than report a pass. A caller that means to waive the gates says so with
// VerifyOptions.Skip (phases.TaskSpec.SkipVerification).
var ErrEmptyPlan = errors.New("gates: gate plan has no checks, so it would pass anything (set VerifyOptions.Skip to waive the gates)")

// ErrNoWorkspace is returned when the snapshot has no WorkspacePath to run
// checks in.
var ErrNoWorkspace = errors.New("gates: snapshot has no workspace path")

// ErrNotContained is matched by Verify's error when a check could not be
// put in its sandbox (VerifierConfig.Sandbox's Contain failed): the check
// did not run.
var ErrNotContained = errors.New("gates: the check could not be contained")

// PlanError reports a gate plan the Verifier cannot run. Nothing has run
// when it is returned.
type PlanError struct {
	Level phases.Level
	Check string // empty when the problem is the level itself
	Err   error
}

func (e *PlanError) Error() string {
	if e.Level == "" && e.Check == "" {
		return fmt.Sprintf("gates: invalid gate plan: %v", e.Err)
	}
	where := string(e.Level)
	if e.Check != "" {
		where += " check " + fmt.Sprintf("%q", e.Check)
	}
	return fmt.Sprintf("gates: invalid gate plan: %s: %v", where, e.Err)
}

// Unwrap returns the specific problem, such as ErrNoCIChecker.
func (e *PlanError) Unwrap() error { return e.Err }

// Is makes every *PlanError match ErrInvalidPlan.
func (e *PlanError) Is(target error) bool { return target == ErrInvalidPlan }

// Verify runs plan against the workspace of snapshot. See the package
// documentation for the semantics.
func (v *Verifier) Verify(ctx context.Context, snapshot phases.Snapshot, plan phases.GatePlan, opts phases.VerifyOptions) (phases.VerificationReport, error) {
	if err := ctx.Err(); err != nil {
		return phases.VerificationReport{}, fmt.Errorf("gates: %w", err)
	}
	if opts.Skip {
		return phases.VerificationReport{Passed: true, Skipped: true}, nil
	}
	levels, err := v.validate(plan)
	if err != nil {
		return phases.VerificationReport{}, err
	}
	if snapshot.WorkspacePath == "" {
		return phases.VerificationReport{}, ErrNoWorkspace
	}
	start := v.clock.Now()
	report := phases.VerificationReport{Passed: true, Levels: make([]phases.LevelResult, 0, len(levels))}
	for _, gl := range levels {
		if !report.Passed && !plan.RunAll {
			report.Levels = append(report.Levels, phases.LevelResult{Level: gl.Level, Skipped: true})
			continue
		}
		lr, err := v.runLevel(ctx, snapshot, gl)
		if err != nil {
			report.Passed = false
			report.Duration = v.clock.Since(start)
			return report, err
		}
		report.Levels = append(report.Levels, lr)
		report.Passed = report.Passed && lr.Passed
	}
	report.Duration = v.clock.Since(start)
	v.log.LogAttrs(ctx, slog.LevelDebug, "verification done", slog.String("run_id", string(opts.RunID)),
		slog.Int("iteration", opts.Iteration), slog.Bool("passed", report.Passed), slog.Duration("duration", report.Duration))
	return report, nil
}

// validate checks the whole plan before anything runs and returns its
// levels in execution order.
func (v *Verifier) validate(plan phases.GatePlan) ([]phases.GateLevel, error) {
	order := phases.Levels()
	seen := map[phases.Level]bool{}
	for _, gl := range plan.Levels {
		if !slices.Contains(order, gl.Level) {
			return nil, &PlanError{Level: gl.Level, Err: fmt.Errorf("unknown level (want one of %v)", order)}
		}
		if seen[gl.Level] {
			return nil, &PlanError{Level: gl.Level, Err: errors.New("level appears twice")}
		}
		seen[gl.Level] = true
		if gl.Level == phases.L3CI && len(gl.Checks) == 0 && v.ci == nil {
			return nil, &PlanError{Level: gl.Level, Err: ErrNoCIChecker}
		}
		names := map[string]bool{}
		for _, c := range gl.Checks {
			switch {
			case c.Name == "":
				return nil, &PlanError{Level: gl.Level, Err: errors.New("a check has no name")}
			case names[c.Name]:
				return nil, &PlanError{Level: gl.Level, Check: c.Name, Err: errors.New("check name appears twice")}
			case len(c.Argv) == 0 || c.Argv[0] == "":
				return nil, &PlanError{Level: gl.Level, Check: c.Name, Err: errors.New("empty argv")}
			case c.Timeout < 0:
				return nil, &PlanError{Level: gl.Level, Check: c.Name, Err: errors.New("negative timeout")}
			}
			names[c.Name] = true
		}
	}
	if !v.runsSomething(plan) {
		return nil, &PlanError{Err: ErrEmptyPlan}
	}
	levels := slices.Clone(plan.Levels)
	slices.SortFunc(levels, func(a, b phases.GateLevel) int {
		return slices.Index(order, a.Level) - slices.Index(order, b.Level)
	})
	return levels, nil
}

// runsSomething reports whether a valid plan runs at least one check: a
// command, or the CIChecker for an L3 level.
func (v *Verifier) runsSomething(plan phases.GatePlan) bool {
	for _, gl := range plan.Levels {
		if len(gl.Checks) > 0 || (gl.Level == phases.L3CI && v.ci != nil) {
			return true
		}
	}
	return false
}

func (v *Verifier) runLevel(ctx context.Context, snapshot phases.Snapshot, gl phases.GateLevel) (phases.LevelResult, error) {
	start := v.clock.Now()
	lr := phases.LevelResult{Level: gl.Level, Checks: make([]phases.CheckResult, len(gl.Checks))}
	// Checks run through an errgroup limited to the configured parallelism
	// (one at a time by default, in plan order). A check's own failure is a
	// result; only a system fault (a cancelled context) is an error, and the
	// first one stops the level.
	var g errgroup.Group
	g.SetLimit(v.parallelism)
	for i, c := range gl.Checks {
		if ctx.Err() != nil {
			break
		}
		g.Go(func() error {
			var err error
			lr.Checks[i], err = v.runCheck(ctx, snapshot.WorkspacePath, gl.Level, c)
			return err
		})
	}
	err := g.Wait()
	if err == nil {
		err = ctx.Err()
	}
	if err != nil {
		lr.Duration = v.clock.Since(start)
		return lr, err
	}
	if gl.Level == phases.L3CI && v.ci != nil {
		ci, err := v.ci.Check(ctx, snapshot)
		if err != nil {
			lr.Duration = v.clock.Since(start)
			return lr, fmt.Errorf("gates: CI check: %w", err)
		}
		lr.Checks = append(lr.Checks, ciChecks(ci)...)
	}
	lr.Passed = true
	for _, c := range lr.Checks {
		lr.Passed = lr.Passed && c.Passed
	}
	lr.Duration = v.clock.Since(start)
	return lr, nil
}

// ciChecks normalises a CIChecker's answer into L3 checks, making sure a
// failing verdict has at least one failing check for feedback to show.
func ciChecks(ci phases.LevelResult) []phases.CheckResult {
	checks := slices.Clone(ci.Checks)
	anyFailed := false
	for i := range checks {
		checks[i].Level = phases.L3CI
		anyFailed = anyFailed || !checks[i].Passed
	}
	if !ci.Passed && !anyFailed {
		checks = append(checks, phases.CheckResult{
			Name: "ci", Level: phases.L3CI, ExitCode: -1, Duration: ci.Duration,
			Output: "CI reported a failure without details of failing checks.",
		})
	}
	return checks
}
