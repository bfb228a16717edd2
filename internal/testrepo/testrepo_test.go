package testrepo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/gitexec"
)

func TestMain(m *testing.M) {
	if err := IsolateGit(); err != nil {
		panic(err)
	}
	os.Exit(m.Run())
}

var who = gitexec.Identity{Name: "Test Person", Email: "test@example.com"}

// gitInDir runs git in dir at a fixed time, so that its commits are
// comparable with New's.
func gitInDir(t *testing.T, dir string, when time.Time, args ...string) string {
	t.Helper()
	date := when.Format(time.RFC3339)
	r := gitexec.Runner{Author: who, Env: []string{"GIT_AUTHOR_DATE=" + date, "GIT_COMMITTER_DATE=" + date}}
	out, err := r.Run(context.Background(), dir, args...)
	require.NoError(t, err, "git %v", args)
	return strings.TrimSpace(out)
}

// The commit New writes is the one git init, git add -A and git commit
// make of the same files at the same time: same id, so same tree and
// blobs; and git finds the work tree, the index and the objects sound.
func TestNewWritesTheCommitGitWould(t *testing.T) {
	when := time.Date(2026, 11, 24, 10, 30, 0, 0, time.FixedZone("", 2*3600))
	cases := map[string]Commit{
		"files in directories": {Files: map[string]string{
			// a-b < a.txt < a/ < a0 in a tree; a/b.txt < a0 in the index.
			"README.md": "hello\n", "a.txt": "x", "a-b": "", "a0": "zero\n", "a/b.txt": "b\n", "a/c/d.txt": "deep\n",
			"same-1": "same\n", "same-2": "same\n",
		}, Message: "initial\n\nwith a body"},
		"empty commit": {Message: "an empty project"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			c.Author, c.When = who, when
			got := filepath.Join(t.TempDir(), "new")
			id, err := New(got, "main", c)
			require.NoError(t, err)

			want := filepath.Join(t.TempDir(), "git")
			require.NoError(t, os.MkdirAll(want, 0o755))
			gitInDir(t, want, when, "init", "-q", "-b", "main")
			for p, content := range c.Files {
				require.NoError(t, os.MkdirAll(filepath.Dir(filepath.Join(want, p)), 0o755))
				require.NoError(t, os.WriteFile(filepath.Join(want, p), []byte(content), 0o644))
			}
			gitInDir(t, want, when, "add", "-A")
			gitInDir(t, want, when, "commit", "-q", "--allow-empty", "-m", c.Message)

			assert.Equal(t, gitInDir(t, want, when, "rev-parse", "HEAD"), id)
			assert.Equal(t, id, gitInDir(t, got, when, "rev-parse", "HEAD"))
			assert.Equal(t, "main", gitInDir(t, got, when, "symbolic-ref", "--short", "HEAD"))
			gitInDir(t, got, when, "fsck", "--strict", "--no-dangling")
			// diff-index trusts the index's stat data: empty output means
			// the index records the files as git add would.
			assert.Empty(t, gitInDir(t, got, when, "diff-index", "HEAD"))
			assert.Empty(t, gitInDir(t, got, when, "status", "--porcelain", "--untracked-files=all"))
			assert.Equal(t, gitInDir(t, want, when, "ls-files", "-s"), gitInDir(t, got, when, "ls-files", "-s"))
			assert.Equal(t, gitInDir(t, want, when, "reflog", "--format=%H %gs", "main"), gitInDir(t, got, when, "reflog", "--format=%H %gs", "main"))

			// And it is a repository like any other.
			require.NoError(t, os.WriteFile(filepath.Join(got, "next.txt"), []byte("next\n"), 0o644))
			gitInDir(t, got, when, "add", "-A")
			gitInDir(t, got, when, "commit", "-q", "-m", "next")
			assert.Equal(t, id, gitInDir(t, got, when, "rev-parse", "HEAD^"))
		})
	}
}

func TestInitMakesAnUnbornBranch(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, Init(dir, "trunk"))
	assert.Equal(t, "trunk", gitInDir(t, dir, time.Now(), "symbolic-ref", "--short", "HEAD"))
	assert.Empty(t, gitInDir(t, dir, time.Now(), "status", "--porcelain"))
	assert.Error(t, Init(dir, "trunk"), "a repository already")
}

func TestNewRefusesPathsOutsideTheWorkTree(t *testing.T) {
	for _, p := range []string{"", "../x", "/abs", "a/../b", ".git/config", "a//b", "./a"} {
		_, err := New(t.TempDir(), "main", Commit{Files: map[string]string{p: "x"}})
		assert.Error(t, err, p)
	}
}

func TestAutoMaintenanceIsOffInTheRepositoryAndItsWorktrees(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "repo")
	_, err := New(dir, "main", Commit{Files: map[string]string{"a": "a\n"}})
	require.NoError(t, err)
	assert.Equal(t, "false", gitInDir(t, dir, time.Now(), "config", "maintenance.auto"))
	wt := filepath.Join(t.TempDir(), "wt")
	gitInDir(t, dir, time.Now(), "worktree", "add", "-q", "-b", "side", wt)
	assert.Equal(t, "false", gitInDir(t, wt, time.Now(), "config", "maintenance.auto"))
	assert.Equal(t, os.DevNull, os.Getenv("GIT_CONFIG_GLOBAL"), "IsolateGit")
	assert.Empty(t, os.Getenv("GIT_CONFIG_COUNT"), "gitexec.LinearHistory reads no history with config in the environment")
}
