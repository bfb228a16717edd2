package phases_test

import (
	"context"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

// A RunLoop missing a service its default handlers need fails before
// anything runs, with an error naming the service, instead of a FAILED run
// that reads like an agent failure.
func TestRunLoop_MissingServiceIsAConfigurationError(t *testing.T) {
	ctrl := gomock.NewController(t) // no calls expected: nothing may run
	agent := phasesmock.NewMockAgentDriver(ctrl)
	snap := phasesmock.NewMockSnapshotter(ctrl)
	verifier := phasesmock.NewMockVerifier(ctrl)
	req := phases.RunRequest{ItemID: "item-1", WorkspacePath: t.TempDir(),
		Task: phases.TaskSpec{Prompt: "p", GatePlan: unitTestPlan()}}

	tests := []struct {
		name     string
		services phases.PhaseServices
		want     string
	}{
		{"no agent driver", phases.PhaseServices{Snapshotter: snap, Verifier: verifier}, "AgentDriver is required"},
		{"no verifier", phases.PhaseServices{AgentDriver: agent, Snapshotter: snap}, "Verifier is required"},
		{"no snapshotter", phases.PhaseServices{AgentDriver: agent, Verifier: verifier}, "snapshotter"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := phases.NewRunLoop(phases.Config{Services: tt.services}).Run(context.Background(), req)
			assert.ErrorContains(t, err, tt.want)
			assert.Empty(t, res.State, "nothing ran")
		})
	}
}
