package team_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/pipeline/team"
)

// A git cut off with its host (a sandboxed agent dies with it, even before
// its lease is written) leaves its lock in the story's worktree: a Run
// clears the locks of worktrees no process works in, and leaves a worktree
// someone works in alone.
func TestARunClearsTheLocksOfAbandonedWorktrees(t *testing.T) {
	f := newFixture(t)
	tm := f.newTeam(t)
	g := gitexec.Runner{Env: demo.IsolatedGitConfig()}
	locks := map[string]string{}
	for _, id := range []string{"X", "Y"} {
		dir := filepath.Join(f.repo, ".worktrees", id)
		_, err := g.Run(context.Background(), f.repo, "worktree", "add", "-q", "-b", "foreman/"+id, dir)
		require.NoError(t, err)
		locks[id] = filepath.Join(f.repo, ".git", "worktrees", id, "index.lock")
		require.NoError(t, os.WriteFile(locks[id], nil, 0o644))
	}
	busy := exec.Command("sleep", "600") // a person's shell in Y, say
	busy.Dir = filepath.Join(f.repo, ".worktrees", "Y")
	require.NoError(t, busy.Start())
	t.Cleanup(func() { _ = busy.Process.Kill(); _ = busy.Wait() })

	team.ClearAbandonedLocks(tm)

	assert.NoFileExists(t, locks["X"], "no process works in X: its lock is a dead git's")
	assert.FileExists(t, locks["Y"], "a process works in Y")
}
