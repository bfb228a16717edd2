package phases_test

import (
	"context"
	"errors"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

func TestFeedbackPhase_GeneratesFeedbackFromReport(t *testing.T) {
	ctrl := gomock.NewController(t)
	gen := phasesmock.NewMockFeedbackGenerator(ctrl)
	snap, report := changedSnapshot("h1"), failReport("--- FAIL: TestAdd")
	gen.EXPECT().Generate(gomock.Any(), snap, report, gatePlan(), phases.FeedbackOptions{RunID: "r1", Iteration: 1}).
		Return("L1 test failed: --- FAIL: TestAdd", nil)

	res := phases.NewFeedbackPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{FeedbackGenerator: gen}),
		phases.FeedbackPhaseInput{Snapshot: snap, VerificationReport: report, GatePlan: gatePlan()})

	assert.True(t, res.Success)
	assert.Equal(t, "L1 test failed: --- FAIL: TestAdd", res.Feedback)
	assert.Nil(t, res.Metadata)
}

func TestFeedbackPhase_FallbackWhenGeneratorFails(t *testing.T) {
	tests := []struct {
		name string
		out  string
		err  error
	}{
		{"generator error", "", errors.New("template broken")},
		{"empty feedback", "  \n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			gen := phasesmock.NewMockFeedbackGenerator(ctrl)
			gen.EXPECT().Generate(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(tt.out, tt.err)

			res := phases.NewFeedbackPhaseHandler().Execute(context.Background(),
				phaseContext(phases.PhaseServices{FeedbackGenerator: gen}),
				phases.FeedbackPhaseInput{VerificationReport: failReport("x")})

			assert.True(t, res.Success, "still a success: there is fallback feedback")
			assert.Nil(t, res.Error)
			assert.Equal(t, map[string]any{phases.MetadataFallback: true}, res.Metadata)
			assert.Equal(t, "Verification failed. Please review and fix:\n- L1 (Tests): Unit tests failed (failed: test)", res.Feedback)
		})
	}
}

func TestFeedbackPhase_FallbackWithoutGenerator(t *testing.T) {
	res := phases.NewFeedbackPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{}), phases.FeedbackPhaseInput{VerificationReport: failReport("x")})
	assert.True(t, res.Success)
	assert.Equal(t, true, res.Metadata[phases.MetadataFallback])
}

func TestFeedbackPhase_FeedbackIncludesActionableInformation(t *testing.T) {
	report := phases.VerificationReport{Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Checks: []phases.CheckResult{{Name: "vet", Passed: false}, {Name: "fmt", Passed: true}}},
		{Level: phases.L1Tests, Checks: []phases.CheckResult{{Name: "unit", Passed: false}}},
		{Level: phases.L2BlackBox, Checks: []phases.CheckResult{{Name: "e2e", Passed: false}}},
		{Level: phases.L3CI, Checks: []phases.CheckResult{{Name: "ci", Passed: false}}},
	}}
	assert.Equal(t, `Verification failed. Please review and fix:
- L0 (Contracts): Type errors or lint issues detected (failed: vet)
- L1 (Tests): Unit tests failed (failed: unit)
- L2 (Blackbox): Integration tests failed (failed: e2e)
- L3 (CI): CI checks failed (failed: ci)`, phases.FallbackFeedback(report))

	skipped := phases.VerificationReport{Levels: []phases.LevelResult{
		{Level: phases.L0Contracts, Checks: []phases.CheckResult{{Name: "vet"}}},
		{Level: phases.L1Tests, Skipped: true},
	}}
	assert.Equal(t, "Verification failed. Please review and fix:\n- L0 (Contracts): Type errors or lint issues detected (failed: vet)",
		phases.FallbackFeedback(skipped), "a level that did not run is not reported as failed")

	assert.Contains(t, phases.FallbackFeedback(phases.VerificationReport{}), "run the gate plan's checks yourself")
}

func TestFeedbackPhase_NoChangesMessage(t *testing.T) {
	ctrl := gomock.NewController(t)
	gen := phasesmock.NewMockFeedbackGenerator(ctrl) // not called: there is no report

	res := phases.NewFeedbackPhaseHandler().Execute(context.Background(),
		phaseContext(phases.PhaseServices{FeedbackGenerator: gen}), phases.FeedbackPhaseInput{NoChanges: true})

	assert.True(t, res.Success)
	assert.Equal(t, phases.NoChangesFeedback, res.Feedback)
	assert.Contains(t, res.Feedback, "No changes detected")
	assert.Equal(t, true, res.Metadata[phases.MetadataNoChanges])
}
