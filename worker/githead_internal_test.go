package worker

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The default commit reader reads HEAD from git's files where it can and
// asks git elsewhere: either way it answers what git rev-parse HEAD does.
func TestDefaultCommitReaderAnswersAsGitDoes(t *testing.T) {
	git := gitexec.Runner{Env: []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}}
	run := func(t *testing.T, dir string, args ...string) string {
		t.Helper()
		out, err := git.Run(context.Background(), dir, args...)
		require.NoError(t, err)
		return strings.TrimSpace(out)
	}
	newRepo := func(t *testing.T) string {
		dir := t.TempDir()
		run(t, dir, "init", "-q", "-b", "main")
		run(t, dir, "commit", "-q", "--allow-empty", "-m", "first")
		return dir
	}
	tests := []struct {
		name    string
		dir     func(t *testing.T) string
		wantErr bool
	}{
		{"main worktree", newRepo, false},
		{"linked worktree with a commit of its own", func(t *testing.T) string {
			wt := filepath.Join(t.TempDir(), "wt")
			repo := newRepo(t)
			run(t, repo, "worktree", "add", "-q", "-b", "item", wt)
			run(t, wt, "commit", "-q", "--allow-empty", "-m", "work")
			return wt
		}, false},
		{"subdirectory, read by git", func(t *testing.T) string {
			sub := filepath.Join(newRepo(t), "sub")
			require.NoError(t, os.Mkdir(sub, 0o755))
			return sub
		}, false},
		{"unborn branch", func(t *testing.T) string {
			dir := t.TempDir()
			run(t, dir, "init", "-q", "-b", "main")
			return dir
		}, true},
		{"not a repository", func(t *testing.T) string {
			dir := t.TempDir()
			require.NoError(t, os.Mkdir(filepath.Join(dir, "plain"), 0o755))
			return filepath.Join(dir, "plain")
		}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := tt.dir(t)
			reader := &gitHead{git: gitexec.Runner{Env: []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(filepath.Dir(dir))}}}
			got, err := reader.Head(context.Background(), dir)
			if tt.wantErr {
				assert.Error(t, err)
				assert.Empty(t, got)
				return
			}
			require.NoError(t, err)
			assert.Equal(t, run(t, dir, "rev-parse", "HEAD"), got)
		})
	}
}
