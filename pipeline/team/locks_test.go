package team

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

func TestClearReapedLocksRemovesWhatAKilledCommitLeft(t *testing.T) {
	dir := t.TempDir()
	repo, wt := filepath.Join(dir, "repo"), filepath.Join(dir, "wt")
	require.NoError(t, demo.NewGoModuleRepo(context.Background(), repo))
	cmd := exec.Command("git", "worktree", "add", "-b", "foreman/S1", wt)
	cmd.Dir = repo
	cmd.Env = append(os.Environ(), demo.IsolatedGitConfig()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "%s", out)

	gitdir, common, ok := worktreeGitDirs(wt)
	require.True(t, ok)
	assert.Equal(t, filepath.Join(repo, ".git", "worktrees", "wt"), gitdir)
	assert.Equal(t, filepath.Join(repo, ".git"), common)
	locks := []string{filepath.Join(gitdir, "index.lock"), filepath.Join(gitdir, "HEAD.lock"),
		filepath.Join(common, "refs", "heads", "foreman", "S1.lock")}
	for _, l := range locks {
		require.NoError(t, os.WriteFile(l, nil, 0o644))
	}
	mainLock := filepath.Join(common, "index.lock")
	require.NoError(t, os.WriteFile(mainLock, nil, 0o644))

	clearReapedLocks(slog.New(slog.DiscardHandler), agentcmd.Reaped{Lease: agentcmd.Lease{Workspace: wt}})
	for _, l := range locks {
		assert.NoFileExists(t, l)
	}
	assert.FileExists(t, mainLock, "the main worktree's index is not the killed agent's")

	_, _, ok = worktreeGitDirs(repo)
	assert.False(t, ok, "the main worktree has a .git directory, not a file")
	clearReapedLocks(slog.New(slog.DiscardHandler), agentcmd.Reaped{Lease: agentcmd.Lease{Workspace: repo}})
	assert.FileExists(t, mainLock)
}
