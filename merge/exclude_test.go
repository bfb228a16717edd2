package merge

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestExcludeKeepsADirectoryOutOfGitStatus(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	exclude := filepath.Join(repo, ".git", "info", "exclude")
	require.NoError(t, os.MkdirAll(filepath.Dir(exclude), 0o755))
	require.NoError(t, os.WriteFile(exclude, []byte("# a person's\n*.log"), 0o644)) // no last newline
	m := newManager(t, repo, nil)
	writeFile(t, repo, ".state/db", "x")
	writeFile(t, repo, "nested/cache/f", "x")
	require.Contains(t, porcelain(t, repo), ".state/")

	require.NoError(t, m.Exclude(filepath.Join(repo, ".state")))
	require.NoError(t, m.Exclude(filepath.Join(repo, ".state")+"/"), "once")
	require.NoError(t, m.Exclude("nested/cache"), "relative to the main worktree")
	require.NoError(t, m.Exclude(t.TempDir()), "outside the repository: nothing to do")
	require.NoError(t, m.Exclude(repo), "the worktree itself: nothing to do")
	assert.Empty(t, porcelain(t, repo))

	data, err := os.ReadFile(exclude)
	require.NoError(t, err)
	assert.Equal(t, "# a person's\n*.log\n# Foreman\n/.state/\n# Foreman\n/nested/cache/\n", string(data))

	// From a linked worktree too: info/exclude is the repository's.
	wt := create(t, m, "w")
	writeFile(t, wt.Path, ".state/db", "x")
	assert.Empty(t, porcelain(t, wt.Path))
	data, err = os.ReadFile(exclude)
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(data), "/.worktrees/"), "the worktree root, excluded by Create")
}
