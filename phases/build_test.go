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

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

func TestBuildPhase_ExecutesAgentSuccessfully(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)
	clk := foreman.NewFakeClock(startTime())
	pc := phaseContext(phases.PhaseServices{AgentDriver: agent, ResultPersister: persister, Clock: clk})
	pc.Task.Agent = phases.AgentConstraints{MaxTurns: 7, Model: "m"}
	pc.Run.Deadline = startTime().Add(10 * time.Minute)

	want := phases.AgentResult{Success: true, SessionID: "sess-2", Tokens: phases.TokenUsage{Input: 10, Output: 5}}
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
			assert.Equal(t, phases.AgentRequest{
				WorkspacePath: "/work/space", TaskPrompt: "add a feature", Feedback: "fix the test",
				SessionID: "sess-1", Iteration: 1, Timeout: 10 * time.Minute,
				Constraints: phases.AgentConstraints{MaxTurns: 7, Model: "m"},
			}, req)
			clk.Advance(2 * time.Second)
			return want, nil
		})
	persister.EXPECT().SaveAgentResult(gomock.Any(), phases.RunID("r1"), 1, want).Return("agent.json", nil)

	res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(), pc,
		phases.BuildPhaseInput{TaskPrompt: "add a feature", Feedback: "fix the test", SessionID: "sess-1"})

	assert.True(t, res.Success)
	assert.Nil(t, res.Error)
	assert.Nil(t, res.BuildError)
	assert.Equal(t, "sess-2", res.SessionID)
	require.NotNil(t, res.AgentResult)
	assert.Equal(t, want, *res.AgentResult)
	assert.Equal(t, 2*time.Second, res.Duration)
}

func TestBuildPhase_KeepsSessionWhenAgentReportsNone(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.AgentResult{Success: true}, nil)
	res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(),
		phaseContext(phases.PhaseServices{AgentDriver: agent}), phases.BuildPhaseInput{TaskPrompt: "p", SessionID: "old"})
	assert.True(t, res.Success)
	assert.Equal(t, "old", res.SessionID)
}

func TestBuildPhase_ClassifiesAgentFailures(t *testing.T) {
	driverErr := errors.New("exec: \"claude\": executable file not found")
	tests := []struct {
		name        string
		result      phases.AgentResult
		err         error
		kind        phases.BuildErrorKind
		phaseKind   phases.ErrorKind
		recoverable bool
		message     string
		agentResult bool
	}{
		{name: "non-zero exit", result: phases.AgentResult{ExitCode: 2, SessionID: "s", Stderr: "warming up\nboom"},
			kind: phases.BuildAgentFailure, phaseKind: phases.ErrorAgentFailed, recoverable: true,
			message: "agent failed with exit code 2: boom", agentResult: true},
		{name: "agent-reported error with exit 0", result: phases.AgentResult{ExitCode: 0, Error: "error_max_turns", Stderr: "noise"},
			kind: phases.BuildAgentFailure, phaseKind: phases.ErrorAgentFailed, recoverable: true,
			message: "agent reported an error: error_max_turns", agentResult: true},
		{name: "timeout", result: phases.AgentResult{ExitCode: -1, TimedOut: true, Signal: "SIGKILL"},
			kind: phases.BuildAgentTimeout, phaseKind: phases.ErrorAgentFailed, recoverable: true,
			message: "agent timed out", agentResult: true},
		{name: "killed by signal", result: phases.AgentResult{ExitCode: -1, Signal: "SIGSEGV"},
			kind: phases.BuildAgentCrash, phaseKind: phases.ErrorAgentFailed, recoverable: false,
			message: "agent killed by signal SIGSEGV", agentResult: true},
		{name: "driver error", err: driverErr,
			kind: phases.BuildSystemError, phaseKind: phases.ErrorException, recoverable: true, message: driverErr.Error()},
		{name: "context cancelled", err: context.Canceled,
			kind: phases.BuildSystemError, phaseKind: phases.ErrorException, recoverable: false, message: "context canceled"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			agent := phasesmock.NewMockAgentDriver(ctrl)
			persister := phasesmock.NewMockResultPersister(ctrl)
			agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(tt.result, tt.err)
			if tt.agentResult {
				// A failed agent's result is persisted too; a driver error has none.
				persister.EXPECT().SaveAgentResult(gomock.Any(), gomock.Any(), gomock.Any(), tt.result).Return("p", nil)
			}
			pc := phaseContext(phases.PhaseServices{AgentDriver: agent, ResultPersister: persister})

			res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(), pc,
				phases.BuildPhaseInput{TaskPrompt: "p", SessionID: "prev"})

			assert.False(t, res.Success)
			require.NotNil(t, res.BuildError)
			require.NotNil(t, res.Error)
			assert.Equal(t, tt.kind, res.BuildError.Kind)
			assert.Equal(t, tt.phaseKind, res.Error.Kind)
			assert.Equal(t, tt.recoverable, res.BuildError.Recoverable)
			assert.Equal(t, tt.message, res.BuildError.Message)
			assert.Equal(t, phases.RunID("r1"), res.BuildError.RunID)
			assert.Equal(t, 1, res.BuildError.Iteration)
			assert.Equal(t, tt.agentResult, res.AgentResult != nil)
			if tt.err != nil {
				assert.ErrorIs(t, res.BuildError, tt.err)
				assert.ErrorIs(t, res.Error, tt.err)
				assert.Equal(t, "prev", res.SessionID, "the session is carried when the agent did not run")
			}
		})
	}
}

func TestBuildPhase_PersistenceFailureDoesNotFailPhase(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.AgentResult{Success: true, SessionID: "s"}, nil)
	persister.EXPECT().SaveAgentResult(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("", errors.New("disk full"))

	logger, logs := newLogRecorder()

	res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(),
		phaseContext(phases.PhaseServices{AgentDriver: agent, ResultPersister: persister, Logger: logger}), phases.BuildPhaseInput{TaskPrompt: "p"})

	assert.True(t, res.Success)
	assert.Nil(t, res.Error)
	assert.Equal(t, "s", res.SessionID)
	errs := logs.at(slog.LevelError)
	require.Len(t, errs, 1, "the failure is logged at ERROR")
	assert.Equal(t, "failed to persist agent result", errs[0].Message)
	assert.Equal(t, map[string]any{"run_id": "r1", "iteration": int64(1), "error": errors.New("disk full")}, errs[0].Attrs)
}

func TestBuildPhase_PassesStreamingCallbackThrough(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	var got []string
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ phases.AgentRequest, cb phases.StreamCallback) (phases.AgentResult, error) {
			require.NotNil(t, cb)
			cb(phases.StreamEvent{Kind: phases.StreamText, Line: "hello", Text: "hello"})
			cb(phases.StreamEvent{Kind: phases.StreamResult, Line: "done", Text: "done"})
			return phases.AgentResult{Success: true}, nil
		})
	pc := phaseContext(phases.PhaseServices{AgentDriver: agent})
	pc.Stream = func(e phases.StreamEvent) { got = append(got, e.Text) }

	res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(), pc, phases.BuildPhaseInput{TaskPrompt: "p"})

	assert.True(t, res.Success)
	assert.Equal(t, []string{"hello", "done"}, got)
}

func TestBuildPhase_AgentTimeoutIsRemainingWallClockCappedByOption(t *testing.T) {
	tests := []struct {
		name     string
		cap      time.Duration
		deadline time.Duration // from now; 0 = none
		want     time.Duration
	}{
		{"no limits", 0, 0, 0},
		{"remaining wall clock", 0, 7 * time.Minute, 7 * time.Minute},
		{"cap smaller than remaining", 5 * time.Minute, 7 * time.Minute, 5 * time.Minute},
		{"remaining smaller than cap", 9 * time.Minute, 7 * time.Minute, 7 * time.Minute},
		{"cap only", 5 * time.Minute, 0, 5 * time.Minute},
		{"deadline passed is never zero", 0, -time.Minute, time.Nanosecond},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			agent := phasesmock.NewMockAgentDriver(ctrl)
			clk := foreman.NewFakeClock(startTime())
			agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).DoAndReturn(
				func(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
					assert.Equal(t, tt.want, req.Timeout)
					return phases.AgentResult{Success: true}, nil
				})
			pc := phaseContext(phases.PhaseServices{AgentDriver: agent, Clock: clk})
			if tt.deadline != 0 {
				pc.Run.Deadline = startTime().Add(tt.deadline)
			}
			phases.NewBuildPhaseHandler(phases.BuildOptions{Timeout: tt.cap}).Execute(context.Background(), pc, phases.BuildPhaseInput{TaskPrompt: "p"})
		})
	}
}

func TestBuildPhase_ValidationFailureIsTypedErrorResult(t *testing.T) {
	// No agent driver mock: validation must stop before any service call.
	pc := phaseContext(phases.PhaseServices{})
	pc.WorkspacePath = ""

	res := phases.NewBuildPhaseHandler(phases.BuildOptions{}).Execute(context.Background(), pc, phases.BuildPhaseInput{TaskPrompt: "  "})

	assert.False(t, res.Success)
	require.NotNil(t, res.Error)
	assert.Equal(t, phases.ErrorValidation, res.Error.Kind)
	var verr *phases.ValidationError
	require.ErrorAs(t, res.Error, &verr)
	assert.Equal(t, phases.PhaseBuild, verr.Phase)
	assert.Equal(t, []string{"task prompt is required", "workspace path is required", "agent driver is required"}, verr.Problems)
	require.NotNil(t, res.BuildError)
	assert.False(t, res.BuildError.Recoverable)
}

func TestHandlers_NameAndPhase(t *testing.T) {
	tests := []struct {
		h interface {
			Name() string
			Phase() phases.Phase
		}
		want phases.Phase
	}{
		{phases.NewBuildPhaseHandler(phases.BuildOptions{}), phases.PhaseBuild},
		{phases.NewSnapshotPhaseHandler(phases.SnapshotOptions{}), phases.PhaseSnapshot},
		{phases.NewVerifyPhaseHandler(), phases.PhaseVerify},
		{phases.NewFeedbackPhaseHandler(), phases.PhaseFeedback},
	}
	for _, tt := range tests {
		assert.Equal(t, tt.want, tt.h.Phase())
		assert.Equal(t, string(tt.want), tt.h.Name())
	}
}
