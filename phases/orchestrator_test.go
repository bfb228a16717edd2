package phases_test

import (
	"context"
	"errors"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

type mockHandlers struct {
	build    *phasesmock.MockBuildHandler
	snapshot *phasesmock.MockSnapshotHandler
	verify   *phasesmock.MockVerifyHandler
	feedback *phasesmock.MockFeedbackHandler
	orch     *phases.PhaseOrchestrator
}

func newMockHandlers(t *testing.T) *mockHandlers {
	ctrl := gomock.NewController(t)
	m := &mockHandlers{
		build: phasesmock.NewMockBuildHandler(ctrl), snapshot: phasesmock.NewMockSnapshotHandler(ctrl),
		verify: phasesmock.NewMockVerifyHandler(ctrl), feedback: phasesmock.NewMockFeedbackHandler(ctrl),
	}
	m.orch = phases.NewPhaseOrchestrator(phases.OrchestratorConfig{Build: m.build, Snapshot: m.snapshot, Verify: m.verify, Feedback: m.feedback})
	return m
}

func iterationInput() phases.IterationInput {
	return phases.IterationInput{TaskPrompt: "add a feature", Feedback: "earlier feedback", SessionID: "s0",
		BeforeState: beforeState(), GatePlan: gatePlan()}
}

func okBuild(session string) phases.BuildPhaseResult {
	return phases.BuildPhaseResult{PhaseResult: phases.PhaseResult{Success: true}, SessionID: session,
		AgentResult: &phases.AgentResult{Success: true, SessionID: session}}
}

func okSnapshot(hash string) phases.SnapshotPhaseResult {
	s := changedSnapshot(hash)
	return phases.SnapshotPhaseResult{PhaseResult: phases.PhaseResult{Success: true}, Snapshot: &s}
}

func verified(r phases.VerificationReport) phases.VerifyPhaseResult {
	return phases.VerifyPhaseResult{PhaseResult: phases.PhaseResult{Success: true}, Report: &r, AllPassed: r.Passed}
}

func TestOrchestrator_SequencesPhasesCorrectly(t *testing.T) {
	m := newMockHandlers(t)
	pc := phaseContext(phases.PhaseServices{})
	snap, report := changedSnapshot("h1"), failReport("FAIL")
	gomock.InOrder(
		m.build.EXPECT().Execute(gomock.Any(), pc, phases.BuildPhaseInput{TaskPrompt: "add a feature", Feedback: "earlier feedback", SessionID: "s0"}).
			Return(okBuild("s1")),
		m.snapshot.EXPECT().Execute(gomock.Any(), pc, phases.SnapshotPhaseInput{BeforeState: beforeState()}).Return(okSnapshot("h1")),
		m.verify.EXPECT().Execute(gomock.Any(), pc, phases.VerifyPhaseInput{Snapshot: snap, GatePlan: gatePlan()}).Return(verified(report)),
		m.feedback.EXPECT().Execute(gomock.Any(), pc, phases.FeedbackPhaseInput{Snapshot: snap, VerificationReport: report, GatePlan: gatePlan()}).
			Return(phases.FeedbackPhaseResult{PhaseResult: phases.PhaseResult{Success: true}, Feedback: "fix TestX"}),
	)

	res := m.orch.ExecuteIteration(context.Background(), pc, iterationInput())

	assert.False(t, res.Success)
	assert.Equal(t, phases.EventVerifyFailedRetryable, res.StateTransition)
	assert.Equal(t, []phases.RunEvent{phases.EventBuildCompleted, phases.EventSnapshotCompleted, phases.EventVerifyFailedRetryable}, res.Events)
	assert.True(t, res.ShouldContinue)
	assert.Equal(t, "fix TestX", res.NextFeedback)
	assert.Equal(t, "s1", res.NextSessionID)
}

func TestOrchestrator_EarlyExitOnPhaseFailure(t *testing.T) {
	t.Run("build failed", func(t *testing.T) {
		m := newMockHandlers(t) // snapshot, verify, feedback: no calls expected
		failed := phases.BuildPhaseResult{SessionID: "s1", BuildError: &phases.BuildError{Kind: phases.BuildAgentFailure},
			PhaseResult: phases.PhaseResult{Error: &phases.PhaseError{Kind: phases.ErrorAgentFailed}}}
		m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(failed)

		res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

		assert.Equal(t, phases.EventBuildFailed, res.StateTransition)
		assert.Equal(t, []phases.RunEvent{phases.EventBuildFailed}, res.Events)
		assert.False(t, res.ShouldContinue)
		assert.Equal(t, "s1", res.NextSessionID, "the session id is carried even from a failed build")
		assert.Nil(t, res.Phases.Snapshot)
	})
	t.Run("snapshot failed", func(t *testing.T) {
		m := newMockHandlers(t)
		m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
		m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.SnapshotPhaseResult{
			PhaseResult: phases.PhaseResult{Error: &phases.PhaseError{Kind: phases.ErrorSnapshotFailed}}})

		res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

		assert.Equal(t, phases.EventSnapshotFailed, res.StateTransition)
		assert.Equal(t, []phases.RunEvent{phases.EventBuildCompleted, phases.EventSnapshotFailed}, res.Events)
		assert.False(t, res.ShouldContinue)
		assert.Nil(t, res.Phases.Verify)
	})
	t.Run("snapshot success without snapshot", func(t *testing.T) {
		m := newMockHandlers(t)
		m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
		m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.SnapshotPhaseResult{
			PhaseResult: phases.PhaseResult{Success: true}})

		res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

		assert.Equal(t, phases.EventSnapshotFailed, res.StateTransition)
	})
	t.Run("verification exception", func(t *testing.T) {
		m := newMockHandlers(t)
		m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
		m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okSnapshot("h"))
		m.verify.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.VerifyPhaseResult{
			PhaseResult: phases.PhaseResult{Error: &phases.PhaseError{Kind: phases.ErrorVerificationException}}})

		res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

		assert.Equal(t, phases.EventVerifyFailedTerminal, res.StateTransition)
		assert.False(t, res.ShouldContinue)
		assert.Nil(t, res.Phases.Feedback, "no report, no feedback")
	})
}

func TestOrchestrator_ReturnsStateTransitionsCorrectly(t *testing.T) {
	tests := []struct {
		name     string
		setup    func(m *mockHandlers)
		final    phases.RunEvent
		events   []phases.RunEvent
		success  bool
		cont     bool
		feedback string
	}{
		{
			name: "verification passed: no feedback",
			setup: func(m *mockHandlers) {
				m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
				m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okSnapshot("h"))
				m.verify.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(verified(passReport()))
			},
			final:   phases.EventVerifyPassed,
			events:  []phases.RunEvent{phases.EventBuildCompleted, phases.EventSnapshotCompleted, phases.EventVerifyPassed},
			success: true,
		},
		{
			name: "no changes: feedback says so, retryable",
			setup: func(m *mockHandlers) {
				empty := phases.Snapshot{DiffHash: "e"}
				m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
				m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.SnapshotPhaseResult{
					Snapshot: &empty, NoChanges: true, PhaseResult: phases.PhaseResult{Error: &phases.PhaseError{Kind: phases.ErrorNoChanges}}})
				m.feedback.EXPECT().Execute(gomock.Any(), gomock.Any(), phases.FeedbackPhaseInput{Snapshot: empty, GatePlan: gatePlan(), NoChanges: true}).
					Return(phases.FeedbackPhaseResult{PhaseResult: phases.PhaseResult{Success: true}, Feedback: phases.NoChangesFeedback})
			},
			final:    phases.EventNoChanges,
			events:   []phases.RunEvent{phases.EventBuildCompleted, phases.EventNoChanges},
			cont:     true,
			feedback: phases.NoChangesFeedback,
		},
		{
			name: "empty but allowed: verified like any change",
			setup: func(m *mockHandlers) {
				empty := phases.Snapshot{}
				m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(okBuild("s1"))
				m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.SnapshotPhaseResult{
					Snapshot: &empty, NoChanges: true, PhaseResult: phases.PhaseResult{Success: true}})
				m.verify.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(verified(passReport()))
			},
			final:   phases.EventVerifyPassed,
			events:  []phases.RunEvent{phases.EventBuildCompleted, phases.EventSnapshotCompleted, phases.EventVerifyPassed},
			success: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newMockHandlers(t)
			tt.setup(m)

			res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

			assert.Equal(t, tt.final, res.StateTransition)
			assert.Equal(t, tt.events, res.Events)
			assert.Equal(t, tt.success, res.Success)
			assert.Equal(t, tt.cont, res.ShouldContinue)
			assert.Equal(t, tt.feedback, res.NextFeedback)
		})
	}
}

func TestOrchestrator_AggregatesResultsProperly(t *testing.T) {
	m := newMockHandlers(t)
	build, snap, verify := okBuild("s1"), okSnapshot("h1"), verified(failReport("FAIL"))
	fb := phases.FeedbackPhaseResult{PhaseResult: phases.PhaseResult{Success: true, Metadata: map[string]any{"fallback": true}}, Feedback: "f"}
	m.build.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(build)
	m.snapshot.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(snap)
	m.verify.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(verify)
	m.feedback.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(fb)

	res := m.orch.ExecuteIteration(context.Background(), phaseContext(phases.PhaseServices{}), iterationInput())

	require.NotNil(t, res.Phases.Build)
	require.NotNil(t, res.Phases.Snapshot)
	require.NotNil(t, res.Phases.Verify)
	require.NotNil(t, res.Phases.Feedback)
	assert.Equal(t, build, *res.Phases.Build)
	assert.Equal(t, snap, *res.Phases.Snapshot)
	assert.Equal(t, verify, *res.Phases.Verify)
	assert.Equal(t, fb, *res.Phases.Feedback)
}

// The orchestrator with its default handlers and mocked services: each
// phase's services are the only dependency its handler has.
func TestBehavior_HandlersTestableInIsolationWithMockedServices(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	snapper := phasesmock.NewMockSnapshotter(ctrl)
	verifier := phasesmock.NewMockVerifier(ctrl)
	gen := phasesmock.NewMockFeedbackGenerator(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)
	gomock.InOrder(
		agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.AgentResult{Success: true, SessionID: "s1"}, nil),
		persister.EXPECT().SaveAgentResult(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("a", nil),
		snapper.EXPECT().Capture(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(changedSnapshot("h1"), nil),
		verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(failReport("FAIL"), nil),
		persister.EXPECT().SaveVerificationReport(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("v", nil),
		gen.EXPECT().Generate(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("fix it", nil),
	)
	pc := phaseContext(phases.PhaseServices{AgentDriver: agent, Snapshotter: snapper, Verifier: verifier,
		FeedbackGenerator: gen, ResultPersister: persister})

	res := phases.NewPhaseOrchestrator(phases.OrchestratorConfig{}).ExecuteIteration(context.Background(), pc, iterationInput())

	assert.Equal(t, phases.EventVerifyFailedRetryable, res.StateTransition)
	assert.Equal(t, "fix it", res.NextFeedback)
	assert.Equal(t, "s1", res.NextSessionID)
}

func TestBehavior_PersistenceFailuresDoNotBlockExecution(t *testing.T) {
	ctrl := gomock.NewController(t)
	agent := phasesmock.NewMockAgentDriver(ctrl)
	snapper := phasesmock.NewMockSnapshotter(ctrl)
	verifier := phasesmock.NewMockVerifier(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)
	diskFull := errors.New("disk full")
	agent.EXPECT().Execute(gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.AgentResult{Success: true}, nil)
	snapper.EXPECT().Capture(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(changedSnapshot("h1"), nil)
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(passReport(), nil)
	persister.EXPECT().SaveAgentResult(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("", diskFull)
	persister.EXPECT().SaveVerificationReport(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return("", diskFull)
	pc := phaseContext(phases.PhaseServices{AgentDriver: agent, Snapshotter: snapper, Verifier: verifier, ResultPersister: persister})

	res := phases.NewPhaseOrchestrator(phases.OrchestratorConfig{}).ExecuteIteration(context.Background(), pc, iterationInput())

	assert.True(t, res.Success)
	assert.Equal(t, phases.EventVerifyPassed, res.StateTransition)
}
