package team

import (
	"context"

	"github.com/agentforeman/foreman"
)

// ApplyDecision carries story's recorded decision to the task graph, as
// Resolve and Run's recovery do.
func ApplyDecision(t *Team, ctx context.Context, story foreman.ItemID) error {
	return t.applyDecision(ctx, story)
}
