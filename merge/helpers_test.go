package merge

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/stretchr/testify/require"
)

var testIdentity = gitexec.Identity{Name: "Test", Email: "test@example.com"}

func testRunner() *gitexec.Runner {
	return &gitexec.Runner{Author: testIdentity, Committer: testIdentity}
}

// git runs a git command for a test, failing it on error.
func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	out, err := testRunner().Run(context.Background(), dir, args...)
	require.NoError(t, err, "git %v", args)
	return strings.TrimSpace(out)
}

// newRepo makes a repository on main with files committed (written without
// git: internal/testrepo).
func newRepo(t testing.TB, files map[string]string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "repo")
	if files == nil {
		files = map[string]string{"README.md": "hello\n", "shared.txt": "one\ntwo\nthree\n"}
	}
	_, err := testrepo.New(dir, "main", testrepo.Commit{Files: files, Author: testIdentity})
	require.NoError(t, err)
	return dir
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

func commitFile(t testing.TB, dir, name, content, msg string) string {
	t.Helper()
	writeFile(t, dir, name, content)
	git(t, dir, "add", "-A")
	git(t, dir, "commit", "-q", "-m", msg)
	return git(t, dir, "rev-parse", "HEAD")
}

func newManager(t testing.TB, repo string, mod func(*Config)) *Manager {
	t.Helper()
	cfg := Config{Repo: repo, Author: Identity(testIdentity)}
	if mod != nil {
		mod(&cfg)
	}
	m, err := New(context.Background(), cfg)
	require.NoError(t, err)
	return m
}

func create(t testing.TB, m *Manager, id foreman.ItemID) Worktree {
	t.Helper()
	wt, err := m.Create(context.Background(), id)
	require.NoError(t, err)
	return wt
}

func porcelain(t testing.TB, dir string) string {
	return git(t, dir, "status", "--porcelain")
}

func revParse(t testing.TB, dir, rev string) string {
	return git(t, dir, "rev-parse", rev)
}

func newFakeClockAt(t time.Time) *foreman.FakeClock { return foreman.NewFakeClock(t) }
