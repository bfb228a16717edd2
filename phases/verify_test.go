package phases_test

import (
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

func fourLevelPlan() phases.GatePlan {
	var plan phases.GatePlan
	for _, l := range phases.Levels() {
		plan.Levels = append(plan.Levels, phases.GateLevel{Level: l, Checks: []phases.GateCheck{{Name: string(l) + "-check"}}})
	}
	return plan
}

func TestVerifyPhase_ExecutesAllVerificationLevels(t *testing.T) {
	ctrl := gomock.NewController(t)
	verifier := phasesmock.NewMockVerifier(ctrl)
	plan := fourLevelPlan()
	snap := changedSnapshot("h1")
	var report phases.VerificationReport
	report.Passed = true
	for _, l := range phases.Levels() {
		report.Levels = append(report.Levels, phases.LevelResult{Level: l, Passed: true,
			Checks: []phases.CheckResult{{Name: string(l) + "-check", Level: l, Passed: true}}})
	}
	// The whole plan reaches the verifier, with the run's identity.
	verifier.EXPECT().Verify(gomock.Any(), snap, plan, phases.VerifyOptions{RunID: "r1", Iteration: 1}).Return(report, nil)

	res := phases.NewVerifyPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{Verifier: verifier}), phases.VerifyPhaseInput{Snapshot: snap, GatePlan: plan})

	assert.True(t, res.Success)
	assert.True(t, res.AllPassed)
	assert.Equal(t, []phases.Level{phases.L0Contracts, phases.L1Tests, phases.L2BlackBox, phases.L3CI},
		res.Metadata[phases.MetadataLevelsRun])
}

func TestVerifyPhase_ReportIndicatesPassFail(t *testing.T) {
	tests := []struct {
		name      string
		report    phases.VerificationReport
		allPassed bool
		levelsRun []phases.Level
	}{
		{"pass", passReport(), true, []phases.Level{phases.L0Contracts, phases.L1Tests}},
		{"fail", failReport("FAIL: TestX"), false, []phases.Level{phases.L0Contracts, phases.L1Tests}},
		{"fail at L0, later levels skipped", phases.VerificationReport{Levels: []phases.LevelResult{
			{Level: phases.L0Contracts, Checks: []phases.CheckResult{{Name: "vet", ExitCode: 1}}},
			{Level: phases.L1Tests, Skipped: true},
		}}, false, []phases.Level{phases.L0Contracts}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			verifier := phasesmock.NewMockVerifier(ctrl)
			verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(tt.report, nil)

			res := phases.NewVerifyPhaseHandler().Execute(context.Background(),
				phaseContext(phases.PhaseServices{Verifier: verifier}), phases.VerifyPhaseInput{GatePlan: gatePlan()})

			assert.True(t, res.Success, "a report, pass or fail, is a successful phase")
			assert.Equal(t, tt.allPassed, res.AllPassed)
			require.NotNil(t, res.Report)
			assert.Equal(t, tt.report, *res.Report)
			assert.Equal(t, tt.levelsRun, res.Metadata[phases.MetadataLevelsRun])
		})
	}
}

func TestVerifyPhase_PersistenceFailureDoesNotFailPhase(t *testing.T) {
	ctrl := gomock.NewController(t)
	verifier := phasesmock.NewMockVerifier(ctrl)
	persister := phasesmock.NewMockResultPersister(ctrl)
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(passReport(), nil)
	persister.EXPECT().SaveVerificationReport(gomock.Any(), phases.RunID("r1"), 1, passReport()).Return("", errors.New("disk full"))

	logger, logs := newLogRecorder()

	res := phases.NewVerifyPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{Verifier: verifier, ResultPersister: persister, Logger: logger}), phases.VerifyPhaseInput{GatePlan: gatePlan()})

	assert.True(t, res.Success)
	assert.True(t, res.AllPassed)
	assert.Nil(t, res.Error)
	errs := logs.at(slog.LevelError)
	require.Len(t, errs, 1, "the failure is logged at ERROR")
	assert.Equal(t, "failed to persist verification report", errs[0].Message)
	assert.Equal(t, map[string]any{"run_id": "r1", "iteration": int64(1), "error": errors.New("disk full")}, errs[0].Attrs)
}

func TestVerifyPhase_ExceptionIsVerificationException(t *testing.T) {
	ctrl := gomock.NewController(t)
	verifier := phasesmock.NewMockVerifier(ctrl)
	boom := errors.New("gate runner crashed")
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.VerificationReport{}, boom)

	res := phases.NewVerifyPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{Verifier: verifier}), phases.VerifyPhaseInput{GatePlan: gatePlan()})

	assert.False(t, res.Success)
	assert.False(t, res.AllPassed)
	assert.Nil(t, res.Report)
	require.NotNil(t, res.Error)
	assert.Equal(t, phases.ErrorVerificationException, res.Error.Kind)
	assert.ErrorIs(t, res.Error, boom)
}

func TestVerifyPhase_SkipIsPassedToVerifier(t *testing.T) {
	ctrl := gomock.NewController(t)
	verifier := phasesmock.NewMockVerifier(ctrl)
	verifier.EXPECT().Verify(gomock.Any(), gomock.Any(), phases.GatePlan{}, phases.VerifyOptions{RunID: "r1", Iteration: 1, Skip: true}).
		Return(phases.VerificationReport{Passed: true, Skipped: true}, nil)
	pc := phaseContext(phases.PhaseServices{Verifier: verifier})
	pc.Task.SkipVerification = true

	res := phases.NewVerifyPhaseHandler().Execute(context.Background(), pc, phases.VerifyPhaseInput{})

	assert.True(t, res.AllPassed)
}

func TestVerifyPhase_EmptyPlanFailsValidation(t *testing.T) {
	ctrl := gomock.NewController(t)
	verifier := phasesmock.NewMockVerifier(ctrl) // no call expected

	res := phases.NewVerifyPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{Verifier: verifier}), phases.VerifyPhaseInput{})

	assert.False(t, res.Success)
	require.NotNil(t, res.Error)
	assert.Equal(t, phases.ErrorValidation, res.Error.Kind)
	assert.Contains(t, res.Error.Message, "gate plan has no checks")
}
