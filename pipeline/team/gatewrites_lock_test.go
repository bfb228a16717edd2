package team

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// Reading a worktree's state writes nothing in it, git's index included:
// a plain `git status` rewrites a stale index under index.lock, which a
// kill at that moment leaves behind (and a live one is in a merge's way).
func TestReadingTheWorktreeTakesNoGitLock(t *testing.T) {
	ctx := context.Background()
	repo := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	git := &gitexec.Runner{Env: demo.IsolatedGitConfig()}
	index := filepath.Join(repo, ".git", "index")
	// A tracked file touched: the index's entry for it is stale, which a
	// status would refresh (and rewrite the index).
	out, err := git.Run(ctx, repo, "ls-files")
	require.NoError(t, err)
	tracked, _, _ := strings.Cut(out, "\n")
	require.NotEmpty(t, tracked)
	later := time.Now().Add(time.Hour)
	require.NoError(t, os.Chtimes(filepath.Join(repo, tracked), later, later))
	before, err := os.Stat(index)
	require.NoError(t, err)

	_, err = readWorktreeState(ctx, git, repo)
	require.NoError(t, err)

	after, err := os.Stat(index)
	require.NoError(t, err)
	assert.True(t, os.SameFile(before, after) && before.ModTime().Equal(after.ModTime()), "the index was rewritten")
	_, err = os.Stat(index + ".lock")
	assert.ErrorIs(t, err, os.ErrNotExist)
}
