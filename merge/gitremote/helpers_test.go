package gitremote_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/stretchr/testify/require"
)

func git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := execGit(dir, args...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// newRemote makes the shared bare repository, main holding one commit.
func newRemote(t testing.TB) string {
	t.Helper()
	root := t.TempDir()
	seed := filepath.Join(root, "seed")
	require.NoError(t, os.MkdirAll(seed, 0o755))
	git(t, seed, "init", "-q", "-b", "main")
	writeFile(t, seed, "README.md", "hello\n")
	git(t, seed, "add", "-A")
	git(t, seed, "commit", "-q", "-m", "initial")
	bare := filepath.Join(root, "shared.git")
	git(t, root, "clone", "-q", "--bare", seed, bare)
	// git would start gc or maintenance after most pushes and fetches;
	// the tests' repositories are tiny and these processes are half of
	// what a test costs.
	appendFile(t, filepath.Join(bare, "config"), "[gc]\n\tauto = 0\n[receive]\n\tautogc = false\n[maintenance]\n\tauto = false\n")
	return bare
}

func appendFile(t testing.TB, path, text string) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_APPEND|os.O_WRONLY, 0)
	require.NoError(t, err)
	_, err = f.WriteString(text)
	require.NoError(t, err)
	require.NoError(t, f.Close())
}

func writeFile(t testing.TB, dir, name, content string) {
	t.Helper()
	p := filepath.Join(dir, name)
	require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(t, os.WriteFile(p, []byte(content), 0o644))
}

// open makes a host's clone of remote in a directory of its own.
func open(t testing.TB, remote string, mod func(*gitremote.Config)) *gitremote.Clone {
	t.Helper()
	cfg := gitremote.Config{Remote: remote, Dir: filepath.Join(t.TempDir(), "clone"),
		Merge: merge.Config{Author: merge.Identity{Name: "Test", Email: "test@example.com"}}}
	if mod != nil {
		mod(&cfg)
	}
	c, err := gitremote.Open(context.Background(), cfg)
	require.NoError(t, err)
	appendFile(t, filepath.Join(c.Dir(), ".git", "config"), "[maintenance]\n\tauto = false\n[gc]\n\tauto = 0\n")
	return c
}

// work checks id out on c, writes a file and pushes.
func work(t testing.TB, c *gitremote.Clone, id foreman.ItemID, file, content string) string {
	t.Helper()
	ctx := context.Background()
	wt, err := c.Checkout(ctx, id)
	require.NoError(t, err)
	writeFile(t, wt.Path, file, content)
	head, err := c.Push(ctx, id, string(id)+": work")
	require.NoError(t, err)
	return head
}

// trailerCommits counts the commits on the remote's main that carry id's trailer.
func trailerCommits(t testing.TB, remote string, id foreman.ItemID) int {
	t.Helper()
	out := git(t, remote, "log", "--format=%H", "--grep=^Foreman-Item: "+string(id)+"$", "main")
	return len(strings.Fields(out))
}
