package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

// The Runtime reports the files an agent changed since the run began,
// unless RuntimeConfig.NoEvidence turns the bookkeeping off.
func TestRuntimeEvidenceAndNoEvidence(t *testing.T) {
	for _, tc := range []struct {
		name       string
		noEvidence bool
	}{{"kept", false}, {"off", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			wrote, finish := make(chan struct{}), make(chan struct{})
			agent := worker.AgentFunc(func(ctx context.Context, r phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
				if err := os.WriteFile(filepath.Join(r.WorkspacePath, "out.txt"), []byte("x"), 0o600); err != nil {
					return phases.AgentResult{}, err
				}
				close(wrote)
				<-finish
				return phases.AgentResult{Success: true}, nil
			})
			in := make(chanInbox, 16)
			rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, NoEvidence: tc.noEvidence}, in)
			a := &worker.Assignment{ID: "a1", Worker: "w1", Item: "i", Prompt: "p", Worktree: dir, Attempt: 1}
			require.NoError(t, rt.Send(context.Background(), worker.Command{Kind: worker.CommandAssign, Worker: "w1", Assignment: "a1", Assign: a}))
			<-wrote
			ev, err := rt.Evidence(context.Background(), foreman.WorkerID("w1"), "a1", t0)
			if tc.noEvidence {
				require.ErrorIs(t, err, worker.ErrNoEvidence)
			} else {
				require.NoError(t, err)
				assert.True(t, ev.Files, "the file written since the start is evidence")
			}
			close(finish)
			for m := next(t, in); m.Kind != worker.MsgDone; m = next(t, in) {
			}
			require.NoError(t, rt.Close(context.Background()))
		})
	}
}
