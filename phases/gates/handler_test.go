package gates

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// The Verifier under phases' verify handler: the handler still refuses an
// empty plan itself (a validation failure, the Verifier is not asked),
// SkipVerification still waives the gates with an empty plan, and a plan
// with checks runs them.
func TestVerifierUnderTheVerifyHandler(t *testing.T) {
	ok := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{sh("ok", "true")}}}}
	tests := []struct {
		name      string
		plan      phases.GatePlan
		skip      bool
		wantKind  phases.ErrorKind
		wantPass  bool
		wantSkips bool
	}{
		{name: "empty plan", plan: phases.GatePlan{}, wantKind: phases.ErrorValidation},
		{name: "empty plan, verification waived", plan: phases.GatePlan{}, skip: true, wantPass: true, wantSkips: true},
		{name: "a plan with a check", plan: ok, wantPass: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			pc := &phases.PhaseContext{ItemID: "US-1", RunID: "r1", Iteration: 1,
				Task:     phases.TaskSpec{Prompt: "p", GatePlan: tt.plan, SkipVerification: tt.skip},
				Services: phases.PhaseServices{Verifier: NewVerifier(VerifierConfig{})}}
			res := phases.NewVerifyPhaseHandler().Execute(context.Background(), pc,
				phases.VerifyPhaseInput{Snapshot: workspace(t), GatePlan: tt.plan})
			if tt.wantKind != "" {
				require.NotNil(t, res.Error)
				assert.Equal(t, tt.wantKind, res.Error.Kind)
				assert.Nil(t, res.Report)
				return
			}
			require.Nil(t, res.Error)
			assert.Equal(t, tt.wantPass, res.AllPassed)
			require.NotNil(t, res.Report)
			assert.Equal(t, tt.wantSkips, res.Report.Skipped)
		})
	}
}
