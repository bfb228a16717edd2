package phases_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

const (
	qd = phases.StateQueued
	ls = phases.StateLeased
	bd = phases.StateBuilding
	sn = phases.StateSnapshotting
	vf = phases.StateVerifying
	fb = phases.StateFeedback
)

func TestRunLoop_SucceedsAfterTwoIterations(t *testing.T) {
	h := newHarness(t, harnessOptions{}, fails("h1", "--- FAIL: TestAdd"), passes("h2"))

	res, err := h.run(context.Background(), phases.Limits{})

	require.NoError(t, err)
	assert.True(t, res.Succeeded())
	assert.Equal(t, phases.StateSucceeded, res.State)
	assert.Equal(t, phases.EventVerifyPassed, res.FinalEvent)
	assert.Equal(t, phases.OutcomePassed, res.Outcome)
	assert.Equal(t, phases.ReasonVerified, res.Reason)
	assert.Equal(t, []phases.RunState{qd, ls, bd, sn, vf, fb, bd, sn, vf, phases.StateSucceeded}, res.States)
	assert.Equal(t, []phases.RunEvent{
		phases.EventWorkspaceAcquired, phases.EventBuildStarted, phases.EventBuildCompleted, phases.EventSnapshotCompleted,
		phases.EventVerifyFailedRetryable, phases.EventFeedbackGenerated, phases.EventBuildCompleted,
		phases.EventSnapshotCompleted, phases.EventVerifyPassed,
	}, h.emitted())

	// Session id and feedback are carried to the next iteration.
	require.Len(t, h.requests, 2)
	assert.Equal(t, "", h.requests[0].SessionID)
	assert.Equal(t, "", h.requests[0].Feedback)
	assert.Equal(t, "sess-1", h.requests[1].SessionID)
	assert.Equal(t, "fix: --- FAIL: TestAdd", h.requests[1].Feedback)
	assert.Equal(t, "sess-2", res.SessionID)

	// Every iteration's phase results and durations.
	require.Len(t, res.Iterations, 2)
	first, second := res.Iterations[0], res.Iterations[1]
	assert.Equal(t, 1, first.Iteration)
	assert.Equal(t, time.Minute, first.Duration)
	assert.Equal(t, time.Minute, first.Result.Phases.Build.Duration)
	assert.Equal(t, phases.EventVerifyFailedRetryable, first.Result.StateTransition)
	assert.NotNil(t, first.Result.Phases.Feedback)
	assert.Equal(t, 2, second.Iteration)
	assert.Equal(t, startTime().Add(time.Minute), second.StartedAt)
	assert.Nil(t, second.Result.Phases.Feedback, "no feedback after a passed verification")
	assert.Equal(t, 2*time.Minute, res.Duration)
	assert.Equal(t, 1, h.feedbacks)

	// Persisted per iteration and per run; cleanup ran once.
	assert.Equal(t, 2, h.iterSaves)
	assert.Equal(t, 1, h.runSaves)
	require.Len(t, h.cleaned, 1)
	assert.Equal(t, phases.StateSucceeded, h.cleaned[0].State)
	assert.Equal(t, phases.ReasonVerified, h.events[len(h.events)-1].Reason)
}

func TestRunLoop_MaxIterations(t *testing.T) {
	t.Run("default of three", func(t *testing.T) {
		h := newHarness(t, harnessOptions{}, fails("h1", "o1"), fails("h2", "o2"), fails("h3", "o3"))
		res, err := h.run(context.Background(), phases.Limits{})
		require.NoError(t, err)
		assert.Equal(t, phases.StateFailed, res.State)
		assert.Equal(t, phases.EventLimitExceeded, res.FinalEvent)
		assert.Equal(t, phases.OutcomeFailedLimit, res.Outcome)
		assert.Equal(t, phases.ReasonMaxIterations, res.Reason)
		assert.Len(t, res.Iterations, phases.DefaultMaxIterations)
		assert.Equal(t, phases.Transition{From: fb, Event: phases.EventLimitExceeded, To: phases.StateFailed},
			res.Transitions[len(res.Transitions)-1])
	})
	t.Run("from Config.Limits", func(t *testing.T) {
		h := newHarness(t, harnessOptions{}, fails("h1", "o1"), fails("h2", "o2"))
		h.cfg.Limits = phases.Limits{MaxIterations: 2}
		res, err := h.run(context.Background(), phases.Limits{})
		require.NoError(t, err)
		assert.Equal(t, phases.ReasonMaxIterations, res.Reason)
		assert.Len(t, res.Iterations, 2)
		assert.Equal(t, 2, res.Limits.MaxIterations)
	})
	t.Run("task limits win over Config.Limits", func(t *testing.T) {
		h := newHarness(t, harnessOptions{}, fails("h1", "o1"))
		h.cfg.Limits = phases.Limits{MaxIterations: 5}
		res, err := h.run(context.Background(), phases.Limits{MaxIterations: 1})
		require.NoError(t, err)
		assert.Equal(t, phases.ReasonMaxIterations, res.Reason)
		assert.Len(t, res.Iterations, 1)
	})
}

func TestRunLoop_WallClockLimitCancelsTheRun(t *testing.T) {
	var h *harness
	second := fails("h2", "o2").with(func(s *step) {
		s.took = 0
		s.during = func(ctx context.Context, req phases.AgentRequest) error {
			assert.Equal(t, 6*time.Minute, req.Timeout, "the agent gets the time that remains")
			h.clk.Advance(7 * time.Minute) // fires the wall-clock timer
			require.Error(t, ctx.Err(), "the run's context is cancelled at the deadline")
			assert.ErrorIs(t, context.Cause(ctx), phases.ErrWallClockExceeded)
			return ctx.Err()
		}
	})
	first := fails("h1", "o1").with(func(s *step) {
		s.took = 4 * time.Minute
		s.during = func(ctx context.Context, _ phases.AgentRequest) error {
			_, has := ctx.Deadline()
			assert.False(t, has, "on a fake clock the limit is a timer on that clock, not a context deadline")
			return nil
		}
	})
	h = newHarness(t, harnessOptions{}, first, second)

	res, err := h.run(context.Background(), phases.Limits{MaxWallClock: 10 * time.Minute})

	require.NoError(t, err)
	assert.Equal(t, 10*time.Minute, h.requests[0].Timeout)
	assert.Equal(t, phases.StateFailed, res.State)
	assert.Equal(t, phases.EventLimitExceeded, res.FinalEvent)
	assert.Equal(t, phases.ReasonWallClock, res.Reason)
	assert.Equal(t, phases.Transition{From: bd, Event: phases.EventLimitExceeded, To: phases.StateFailed},
		res.Transitions[len(res.Transitions)-1], "reported as the limit, not as a build failure")
	assert.Len(t, res.Iterations, 2)
	assert.Len(t, h.cleaned, 1)
}

// With the real clock the limit is a context deadline that services can
// read, and its expiry ends the run as the wall-clock limit.
func TestRunLoop_WallClockLimitIsAContextDeadlineOnTheRealClock(t *testing.T) {
	t.Run("services see the deadline", func(t *testing.T) {
		var deadline time.Time
		var hasDeadline bool
		h := newHarness(t, harnessOptions{}, passes("h1").with(func(s *step) {
			s.took = 0
			s.during = func(ctx context.Context, _ phases.AgentRequest) error {
				deadline, hasDeadline = ctx.Deadline()
				return nil
			}
		}))
		h.cfg.Services.Clock = nil // the real clock

		res, err := h.run(context.Background(), phases.Limits{MaxWallClock: time.Hour})

		require.NoError(t, err)
		assert.Equal(t, phases.StateSucceeded, res.State)
		require.True(t, hasDeadline, "the run's context has a deadline")
		assert.True(t, deadline.Equal(res.StartedAt.Add(time.Hour)), "deadline %v, started %v", deadline, res.StartedAt)
	})
	t.Run("its expiry is the wall-clock limit", func(t *testing.T) {
		// The deadline may pass before or while the agent runs; either way
		// the run ends the same.
		h := newHarness(t, harnessOptions{}, passes("h1").with(func(s *step) {
			s.took = 0
			s.during = func(ctx context.Context, _ phases.AgentRequest) error {
				<-ctx.Done() // the deadline itself, not a sleep: the agent waits for it
				return ctx.Err()
			}
		}))
		h.cfg.Services.Clock = nil

		res, err := h.run(context.Background(), phases.Limits{MaxWallClock: time.Millisecond})

		require.NoError(t, err)
		assert.Equal(t, phases.StateFailed, res.State)
		assert.Equal(t, phases.EventLimitExceeded, res.FinalEvent)
		assert.Equal(t, phases.ReasonWallClock, res.Reason)
		assert.Equal(t, phases.ErrWallClockExceeded.Error(), res.Message, "the context's cause")
	})
}

func TestRunLoop_CallerDeadlineEndsTheRunAsWallClock(t *testing.T) {
	blocks := passes("h1").with(func(s *step) {
		s.during = func(ctx context.Context, _ phases.AgentRequest) error {
			<-ctx.Done() // the caller's deadline, not a sleep: the agent waits for it
			return ctx.Err()
		}
	})
	h := newHarness(t, harnessOptions{}, blocks)
	ctx, cancel := context.WithTimeout(context.Background(), time.Millisecond)
	defer cancel()

	res, err := h.run(ctx, phases.Limits{})

	require.NoError(t, err)
	assert.Equal(t, phases.StateFailed, res.State)
	assert.Equal(t, phases.EventLimitExceeded, res.FinalEvent)
	assert.Equal(t, phases.ReasonWallClock, res.Reason)
}

func TestRunLoop_LoopDetection(t *testing.T) {
	empty := func() step {
		return step{agent: phases.AgentResult{Success: true}, snapshot: phases.Snapshot{DiffHash: "e"}}
	}
	refused := func() step {
		s := empty()
		s.agent.PermissionDenials = []phases.AgentPermissionDenial{{Tool: "Write", Input: "/repo/x.go"}, {Tool: "Write", Input: "/repo/x.go"},
			{Tool: "Bash", Input: "git commit -m x"}}
		return s
	}
	tests := []struct {
		name       string
		steps      []step
		limits     phases.Limits
		reason     phases.Reason
		iterations int
		message    string
	}{
		{name: "refused tools and no changes end the run at once", steps: []step{refused(), refused(), refused()},
			limits: phases.Limits{MaxIterations: 5}, reason: phases.ReasonPermissionDenied, iterations: 1,
			message: "the agent was refused Write (/repo/x.go), Bash (git commit -m x) and made no changes; " + phases.GrantAdvice},
		{name: "refused tools with changes go on", steps: []step{fails("a", "o1").with(func(s *step) { s.agent.PermissionDenials = refused().agent.PermissionDenials }),
			fails("b", "o2"), fails("c", "o3")},
			limits: phases.Limits{MaxIterations: 3}, reason: phases.ReasonMaxIterations, iterations: 3},
		{name: "same diff hash", steps: []step{fails("same", "o1"), fails("same", "o2"), fails("same", "o3")},
			limits: phases.Limits{MaxIterations: 5}, reason: phases.ReasonLoopDetected, iterations: 3, message: "the same diff 3 iterations running"},
		{name: "same failing output", steps: []step{fails("a", "boom"), fails("b", "boom"), fails("c", "boom")},
			limits: phases.Limits{MaxIterations: 5}, reason: phases.ReasonLoopDetected, iterations: 3, message: "the same failing gate output 3 iterations running"},
		{name: "no changes again and again", steps: []step{empty(), empty(), empty()},
			limits: phases.Limits{MaxIterations: 5}, reason: phases.ReasonNoChanges, iterations: 3, message: "the agent made no changes 3 iterations running"},
		{name: "no changes, then a change, then no changes", steps: []step{empty(), empty(), fails("a", "o1"), empty(), empty()},
			limits: phases.Limits{MaxIterations: 5}, reason: phases.ReasonMaxIterations, iterations: 5},
		{name: "a repeat that is not running does not count", steps: []step{fails("a", "boom"), fails("b", "other"), fails("c", "boom"), fails("d", "boom")},
			limits: phases.Limits{MaxIterations: 4}, reason: phases.ReasonMaxIterations, iterations: 4},
		{name: "custom threshold", steps: []step{fails("same", "o1"), fails("same", "o2")},
			limits: phases.Limits{MaxIterations: 5, LoopThreshold: 2}, reason: phases.ReasonLoopDetected, iterations: 2, message: "the same diff 2 iterations running"},
		{name: "disabled", steps: []step{fails("same", "x"), fails("same", "x"), fails("same", "x"), fails("same", "x")},
			limits: phases.Limits{MaxIterations: 4, LoopThreshold: -1}, reason: phases.ReasonMaxIterations, iterations: 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, tt.steps...)
			res, err := h.run(context.Background(), tt.limits)
			require.NoError(t, err)
			assert.Equal(t, phases.StateFailed, res.State)
			assert.Equal(t, phases.EventLimitExceeded, res.FinalEvent)
			assert.Equal(t, tt.reason, res.Reason)
			assert.Len(t, res.Iterations, tt.iterations)
			if tt.message != "" {
				assert.Equal(t, tt.message, res.Message)
			}
		})
	}
}

func TestRunLoop_CancellationEndsCanceledWithCleanup(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	second := passes("h2").with(func(s *step) {
		s.during = func(ctx context.Context, _ phases.AgentRequest) error {
			cancel() // the user cancels while the agent runs
			return ctx.Err()
		}
	})
	h := newHarness(t, harnessOptions{}, fails("h1", "o1"), second)

	res, err := h.run(ctx, phases.Limits{})

	require.NoError(t, err, "cancellation is an outcome")
	assert.Equal(t, phases.StateCanceled, res.State)
	assert.Equal(t, phases.EventUserCanceled, res.FinalEvent)
	assert.Equal(t, phases.OutcomeCanceled, res.Outcome)
	assert.Equal(t, phases.ReasonCanceled, res.Reason)
	assert.Equal(t, phases.Transition{From: bd, Event: phases.EventUserCanceled, To: phases.StateCanceled},
		res.Transitions[len(res.Transitions)-1])
	require.Len(t, h.cleaned, 1, "cleanup runs once")
	assert.Equal(t, phases.StateCanceled, h.cleaned[0].State)
	assert.Equal(t, 1, h.runSaves, "the canceled run is persisted")
	assert.Equal(t, 2, h.iterSaves)
}

func TestRunLoop_CanceledBeforeStart(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	res, err := h.run(ctx, phases.Limits{})

	require.NoError(t, err)
	assert.Equal(t, phases.StateCanceled, res.State)
	assert.Equal(t, []phases.RunState{qd, phases.StateCanceled}, res.States)
	assert.Empty(t, h.requests)
	assert.Len(t, h.cleaned, 1)
}

func TestRunLoop_BudgetExceeded(t *testing.T) {
	costly := func(hash string, tokens int64, cost float64) step {
		return fails(hash, hash).with(func(s *step) {
			s.agent.Tokens = phases.TokenUsage{Input: tokens / 2, Output: tokens / 2, CacheRead: 1_000_000}
			s.agent.CostUSD = cost
		})
	}
	tests := []struct {
		name   string
		limits phases.Limits
	}{
		{"tokens", phases.Limits{MaxIterations: 5, MaxTokens: 1000}},
		{"cost", phases.Limits{MaxIterations: 5, MaxCostUSD: 0.5}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, costly("a", 600, 0.3), costly("b", 600, 0.3), costly("c", 600, 0.3))
			res, err := h.run(context.Background(), tt.limits)
			require.NoError(t, err)
			assert.Equal(t, phases.StateFailed, res.State)
			assert.Equal(t, phases.ReasonBudgetExceeded, res.Reason)
			assert.Len(t, res.Iterations, 2, "cache reads are not counted against MaxTokens")
			assert.Equal(t, int64(1200), res.Tokens.Input+res.Tokens.Output)
			assert.InDelta(t, 0.6, res.CostUSD, 1e-9)
		})
	}
}

func TestRunLoop_PersistenceFailureIgnored(t *testing.T) {
	h := newHarness(t, harnessOptions{persistErr: errors.New("disk full")}, fails("h1", "o1"), passes("h2"))
	logger, logs := newLogRecorder()
	h.cfg.Services.Logger = logger

	res, err := h.run(context.Background(), phases.Limits{})

	require.NoError(t, err)
	assert.Equal(t, phases.StateSucceeded, res.State)
	assert.Equal(t, 2, h.iterSaves)
	assert.Equal(t, 1, h.runSaves)
	// Every failed save is logged at ERROR, in the order it happened.
	assert.Equal(t, []string{
		"failed to persist agent result: disk full",
		"failed to persist verification report: disk full",
		"failed to persist iteration: disk full",
		"failed to persist agent result: disk full",
		"failed to persist verification report: disk full",
		"failed to persist iteration: disk full",
		"failed to persist run: disk full",
	}, logs.errorMessages())
	for _, r := range logs.at(slog.LevelError) {
		assert.Equal(t, "run-1", r.Attrs["run_id"], r.Message)
	}
}

func TestRunLoop_NoChangesGoesToFeedbackAndRetries(t *testing.T) {
	empty := step{agent: phases.AgentResult{Success: true}, snapshot: phases.Snapshot{}}
	h := newHarness(t, harnessOptions{}, empty, passes("h2"))

	res, err := h.run(context.Background(), phases.Limits{})

	require.NoError(t, err)
	assert.Equal(t, phases.StateSucceeded, res.State)
	assert.Equal(t, []phases.RunState{qd, ls, bd, sn, fb, bd, sn, vf, phases.StateSucceeded}, res.States)
	assert.Equal(t, phases.NoChangesFeedback, h.requests[1].Feedback)
	assert.Equal(t, 0, h.feedbacks, "nothing was verified, so the generator is not asked")
	assert.Nil(t, res.Iterations[0].Result.Phases.Verify)
}

// Phase failures result in the correct state transitions.
func TestBehavior_PhaseFailuresResultInCorrectStateTransitions(t *testing.T) {
	tests := []struct {
		name    string
		step    step
		last    phases.Transition
		outcome phases.Outcome
		reason  phases.Reason
		message string
	}{
		{"build failed", step{agent: phases.AgentResult{ExitCode: 3}},
			phases.Transition{From: bd, Event: phases.EventBuildFailed, To: phases.StateFailed},
			phases.OutcomeFailedBuild, phases.ReasonBuildFailed, "agent failed with exit code 3"},
		{"snapshot failed", step{agent: phases.AgentResult{Success: true}, snapErr: errors.New("git broke")},
			phases.Transition{From: sn, Event: phases.EventSnapshotFailed, To: phases.StateFailed},
			phases.OutcomeFailedSnapshot, phases.ReasonSnapshotFailed, "git broke"},
		{"verifier exception", passes("h").with(func(s *step) { s.verifyErr = errors.New("gate runner crashed") }),
			phases.Transition{From: vf, Event: phases.EventVerifyFailedTerminal, To: phases.StateFailed},
			phases.OutcomeFailedVerification, phases.ReasonVerificationError, "gate runner crashed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := newHarness(t, harnessOptions{}, tt.step)
			res, err := h.run(context.Background(), phases.Limits{})
			require.NoError(t, err, "a failed phase is an outcome, not an error")
			assert.Equal(t, phases.StateFailed, res.State)
			assert.Equal(t, tt.last, res.Transitions[len(res.Transitions)-1])
			assert.Equal(t, tt.outcome, res.Outcome)
			assert.Equal(t, tt.reason, res.Reason)
			assert.Equal(t, tt.message, res.Message)
			assert.Len(t, res.Iterations, 1)
		})
	}
}

func TestRunLoop_BeforeStateFailureIsSystemError(t *testing.T) {
	gitMissing := errors.New("exec: git: not found")
	h := newHarness(t, harnessOptions{beforeErr: gitMissing})

	res, err := h.run(context.Background(), phases.Limits{})

	require.ErrorIs(t, err, gitMissing)
	assert.ErrorIs(t, res.Err, gitMissing)
	assert.Equal(t, phases.StateFailed, res.State)
	assert.Equal(t, phases.EventSystemError, res.FinalEvent)
	assert.Equal(t, phases.ReasonSystemError, res.Reason)
	assert.Equal(t, []phases.RunState{qd, ls, phases.StateFailed}, res.States)
	assert.Empty(t, h.requests)
}

func TestRunLoop_InvalidRequestRunsNothing(t *testing.T) {
	h := newHarness(t, harnessOptions{})
	loop := phases.NewRunLoop(h.cfg)
	for name, req := range map[string]phases.RunRequest{
		"bad item id":    {ItemID: "../etc", WorkspacePath: "/ws"},
		"bad run id":     {ItemID: "ok", RunID: "a/b", WorkspacePath: "/ws"},
		"no workspace":   {ItemID: "ok"},
		"no snapshotter": {ItemID: "ok", WorkspacePath: "/ws"},
	} {
		l := loop
		if name == "no snapshotter" {
			l = phases.NewRunLoop(phases.Config{})
		}
		_, err := l.Run(context.Background(), req)
		assert.Error(t, err, name)
	}
	assert.Empty(t, h.events)
}

func TestRunLoop_GivenBeforeStateAndGeneratedRunID(t *testing.T) {
	ctrl := gomock.NewController(t)
	snapper := phasesmock.NewMockSnapshotter(ctrl) // Before is not called
	agent := phasesmock.NewMockAgentDriver(ctrl)
	verifier := phasesmock.NewMockVerifier(ctrl)
	given := phases.BeforeState{BaseCommit: "assignment-base"}
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.AgentResult{Success: true}, nil)
	snapper.EXPECT().Capture(gomock.Any(), gomock.Any(), given, gomock.Any()).Return(changedSnapshot("h"), nil)
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(passReport(), nil)
	loop := phases.NewRunLoop(phases.Config{Services: phases.PhaseServices{AgentDriver: agent, Snapshotter: snapper, Verifier: verifier}})

	res, err := loop.Run(context.Background(), phases.RunRequest{ItemID: "item-1", WorkspacePath: "/ws", BeforeState: &given,
		Task: phases.TaskSpec{Prompt: "p", GatePlan: gatePlan()}})

	require.NoError(t, err)
	assert.Equal(t, phases.StateSucceeded, res.State)
	assert.Equal(t, given, res.BeforeState)
	assert.Regexp(t, `^item-1-[0-9a-z]+$`, string(res.RunID))
}

// Handlers get a copy of the run: what they change does not reach the run.
func TestRunLoop_HandlersCannotMutateTheRun(t *testing.T) {
	h := newHarness(t, harnessOptions{}, fails("h1", "o1"), passes("h2"))
	ctrl := gomock.NewController(t)
	build := phasesmock.NewMockBuildHandler(ctrl)
	real := phases.NewBuildPhaseHandler(phases.BuildOptions{})
	var seen []phases.RunView
	var seenArgv0, seenDirty []string
	build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(ctx context.Context, pc *phases.PhaseContext, in phases.BuildPhaseInput) phases.BuildPhaseResult {
			seen = append(seen, pc.Run)
			seenArgv0 = append(seenArgv0, pc.Task.GatePlan.Levels[0].Checks[0].Argv[0])
			seenDirty = append(seenDirty, pc.BeforeState.DirtyFiles[0])
			res := real.Execute(ctx, pc, in)
			pc.Run.Iteration, pc.Run.MaxIterations, pc.Run.SessionID = 99, 99, "hijacked"
			pc.Task.Prompt, pc.Task.Limits.MaxIterations = "hijacked", 99
			// Writes through the slices the context holds.
			pc.Task.GatePlan.Levels[0].Checks[0].Argv[0] = "rm"
			pc.Task.GatePlan.Levels[0].Checks[0].Env = append(pc.Task.GatePlan.Levels[0].Checks[0].Env[:0], "HIJACKED=1")
			pc.Task.GatePlan.Levels[1].Level = "L9"
			pc.BeforeState.DirtyFiles[0] = "hijacked.txt"
			return res
		}).Times(2)
	h.cfg.Handlers.Build = build

	res, err := h.run(context.Background(), phases.Limits{})

	require.NoError(t, err)
	assert.Equal(t, phases.StateSucceeded, res.State)
	// The verifier and snapshotter mocks expect gatePlan() and beforeState()
	// exactly, so the same iteration's later phases saw the originals too.
	assert.Equal(t, []string{"go", "go"}, seenArgv0, "the next iteration sees the original plan")
	assert.Equal(t, []string{"notes.txt", "notes.txt"}, seenDirty, "the next iteration sees the original dirty files")
	assert.Equal(t, beforeState(), res.BeforeState)
	require.Len(t, seen, 2)
	assert.Equal(t, 2, seen[1].Iteration)
	assert.Equal(t, 3, seen[1].MaxIterations)
	assert.Equal(t, "sess-1", seen[1].SessionID)
	assert.Equal(t, phases.StateBuilding, seen[1].State)
	assert.Equal(t, "add a feature", h.requests[1].TaskPrompt)
}
