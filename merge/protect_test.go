package merge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// hostState is a repository whose main checkout holds a host's state the
// way a team keeps it: .state/db (protected, git-ignored), and a second
// item's worktree with uncommitted work.
type hostState struct {
	repo string
	m    *Manager
}

func newHostState(t *testing.T) hostState {
	t.Helper()
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.Protected = []string{".state"} })
	writeFile(t, repo, ".git/info/exclude", "/.state/\n")
	writeFile(t, repo, ".state/db", "the host's database\n")
	other := create(t, m, "other")
	writeFile(t, other.Path, "wip.txt", "another item's uncommitted work\n")
	return hostState{repo: repo, m: m}
}

// intact checks that nothing of the host's state or the other item's
// worktree was lost, and that the main checkout is clean.
func (h hostState) intact(t *testing.T) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(h.repo, ".state", "db"))
	require.NoError(t, err, "the host's state")
	assert.Equal(t, "the host's database\n", string(data))
	data, err = os.ReadFile(filepath.Join(h.m.Root(), "other", "wip.txt"))
	require.NoError(t, err, "the other item's worktree")
	assert.Equal(t, "another item's uncommitted work\n", string(data))
	assert.Empty(t, porcelain(t, h.repo), "the main checkout is clean")
}

func TestMergeRefusesABranchThatTouchesAProtectedDirectory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name  string
		write func(t *testing.T, wt string)
		paths []string
	}{
		{"a file in the place of the state directory", func(t *testing.T, wt string) {
			writeFile(t, wt, ".state", "evil\n")
		}, []string{".state"}},
		{"the same name in other case", func(t *testing.T, wt string) {
			writeFile(t, wt, ".STATE", "evil\n")
		}, []string{".STATE"}},
		{"a symbolic link in its place", func(t *testing.T, wt string) {
			require.NoError(t, os.Symlink("/tmp", filepath.Join(wt, ".state")))
		}, []string{".state"}},
		{"files inside the state directory", func(t *testing.T, wt string) {
			writeFile(t, wt, ".state/db", "overwritten\n")
			git(t, wt, "add", "-f", ".state/db")
		}, []string{".state/db"}},
		{"a file in the place of the worktree root", func(t *testing.T, wt string) {
			writeFile(t, wt, ".worktrees", "evil\n")
		}, []string{".worktrees"}},
		{"a file inside the worktree root", func(t *testing.T, wt string) {
			writeFile(t, wt, ".worktrees/x", "evil\n")
			git(t, wt, "add", "-f", ".worktrees/x")
		}, []string{".worktrees/x"}},
		{"another item's worktree replaced by a file", func(t *testing.T, wt string) {
			writeFile(t, wt, ".worktrees/other", "evil\n")
			git(t, wt, "add", "-f", ".worktrees/other")
		}, []string{".worktrees/other"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHostState(t)
			wt := create(t, h.m, "evil")
			writeFile(t, wt.Path, "ok.txt", "fine\n")
			tc.write(t, wt.Path)
			git(t, wt.Path, "add", "-A")
			git(t, wt.Path, "commit", "-q", "-m", "evil")
			old := revParse(t, h.repo, "main")

			_, err := h.m.Merge(ctx, "evil", Request{Title: "t", CommitPending: true})
			var perr *ProtectedPathError
			require.ErrorAs(t, err, &perr)
			assert.ErrorIs(t, err, ErrProtectedPath)
			assert.Equal(t, "branch", perr.Source)
			assert.Equal(t, tc.paths, perr.Paths)
			assert.ElementsMatch(t, []string{".worktrees", ".state"}, perr.Protected)
			assert.Contains(t, err.Error(), tc.paths[0])
			assert.Equal(t, old, revParse(t, h.repo, "main"), "main did not move")
			h.intact(t)
		})
	}
}

func TestMergeRefusesToCommitUncommittedWorkInAProtectedPlace(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	cases := []struct {
		name  string
		write func(t *testing.T, wt string)
		paths []string
	}{
		{"an untracked file in the place of the state directory", func(t *testing.T, wt string) {
			writeFile(t, wt, ".state", "evil\n")
		}, []string{".state"}},
		{"a staged file inside the worktree root", func(t *testing.T, wt string) {
			writeFile(t, wt, ".worktrees/x", "evil\n")
			git(t, wt, "add", "-f", ".worktrees/x")
		}, []string{".worktrees/x"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			h := newHostState(t)
			wt := create(t, h.m, "evil")
			commitFile(t, wt.Path, "ok.txt", "fine\n", "fine")
			head := revParse(t, wt.Path, "HEAD")
			writeFile(t, wt.Path, "also.txt", "uncommitted\n")
			tc.write(t, wt.Path)
			status := porcelain(t, wt.Path)
			old := revParse(t, h.repo, "main")

			_, err := h.m.Merge(ctx, "evil", Request{Title: "t", CommitPending: true})
			var perr *ProtectedPathError
			require.ErrorAs(t, err, &perr)
			assert.Equal(t, "uncommitted", perr.Source)
			assert.Equal(t, tc.paths, perr.Paths)
			assert.Contains(t, err.Error(), "uncommitted changes add "+tc.paths[0])
			assert.Equal(t, head, revParse(t, wt.Path, "HEAD"), "nothing was committed")
			assert.Equal(t, status, porcelain(t, wt.Path), "the worktree is as it was")
			assert.Equal(t, old, revParse(t, h.repo, "main"))
			h.intact(t)
		})
	}
}

func TestMergeRefusesAnUntrackedDirectoryHoldingANestedProtectedPath(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.Protected = []string{"var/state"} })
	wt := create(t, m, "evil")
	commitFile(t, wt.Path, "ok.txt", "fine\n", "fine")
	writeFile(t, wt.Path, "var/state/db", "evil\n") // git status shows "var/"
	_, err := m.Merge(context.Background(), "evil", Request{Title: "t", CommitPending: true})
	var perr *ProtectedPathError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, []string{"var"}, perr.Paths)

	// A file in the place of a parent of the protected directory is
	// refused on the branch too.
	require.NoError(t, os.RemoveAll(filepath.Join(wt.Path, "var")))
	commitFile(t, wt.Path, "var", "a file\n", "a file named var")
	_, err = m.Merge(context.Background(), "evil", Request{Title: "t"})
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, "branch", perr.Source)
	assert.Equal(t, []string{"var"}, perr.Paths)

	// An unrelated untracked directory beside it is committed as before.
	require.NoError(t, os.Remove(filepath.Join(wt.Path, "var")))
	git(t, wt.Path, "commit", "-q", "-am", "no var")
	writeFile(t, wt.Path, "var2/x", "fine\n")
	res, err := m.Merge(context.Background(), "evil", Request{Title: "t", CommitPending: true})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
}

func TestMergeOfABranchThatAddedAndRemovedAProtectedPathLands(t *testing.T) {
	t.Parallel()
	h := newHostState(t)
	wt := create(t, h.m, "undo")
	commitFile(t, wt.Path, ".state", "oops\n", "add")
	require.NoError(t, os.Remove(filepath.Join(wt.Path, ".state")))
	commitFile(t, wt.Path, "ok.txt", "fine\n", "remove it again")
	res, err := h.m.Merge(context.Background(), "undo", Request{Title: "t"})
	require.NoError(t, err, "neither the branch's head nor the squash has it")
	assert.Equal(t, Merged, res.Status)
	h.intact(t)
}

func TestMergeRefusesASquashOntoATargetThatGainedAProtectedPath(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	git(t, repo, "branch", "release")
	m := newManager(t, repo, func(c *Config) { c.TargetBranch = "release"; c.Protected = []string{".state"} })
	// Someone commits .state on release (not checked out) after New.
	other := filepath.Join(t.TempDir(), "release")
	git(t, repo, "worktree", "add", "-q", other, "release")
	commitFile(t, other, ".state", "x\n", "someone tracks .state")
	git(t, repo, "worktree", "remove", "--force", other)
	wt := create(t, m, "item")
	commitFile(t, wt.Path, "ok.txt", "fine\n", "fine")
	old := revParse(t, repo, "release")
	_, err := m.Merge(context.Background(), "item", Request{Title: "t"})
	var perr *ProtectedPathError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, "squash", perr.Source)
	assert.Equal(t, []string{".state"}, perr.Paths)
	assert.Equal(t, old, revParse(t, repo, "release"))
}

func TestMergeNeverLetsGitDeleteIgnoredFilesInTheTargetCheckout(t *testing.T) {
	t.Parallel()
	// A directory the host ignores but did not declare protected: git
	// would replace it by the item's file; the merge refuses instead.
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	writeFile(t, repo, ".git/info/exclude", "/cache/\n")
	writeFile(t, repo, "cache/precious", "ignored, and kept\n")
	wt := create(t, m, "item")
	commitFile(t, wt.Path, "cache", "a file where the ignored directory is\n", "cache")
	old := revParse(t, repo, "main")
	_, err := m.Merge(context.Background(), "item", Request{Title: "t"})
	var derr *DirtyError
	require.ErrorAs(t, err, &derr)
	assert.True(t, derr.Target)
	assert.Equal(t, []string{"cache"}, derr.Files)
	assert.Equal(t, old, revParse(t, repo, "main"))
	data, err := os.ReadFile(filepath.Join(repo, "cache", "precious"))
	require.NoError(t, err)
	assert.Equal(t, "ignored, and kept\n", string(data))
}

func TestCheckingOutABranchWithAProtectedPathInItsWorktreeLeavesTheHostAlone(t *testing.T) {
	t.Parallel()
	h := newHostState(t)
	wt := create(t, h.m, "evil")
	commitFile(t, wt.Path, ".state", "evil\n", "evil")
	commitFile(t, wt.Path, ".worktrees", "evil\n", "evil too")
	// The worktree is made again on the branch (a restart, a repair).
	require.NoError(t, h.m.Remove(context.Background(), "evil"))
	wt = create(t, h.m, "evil")
	assert.FileExists(t, filepath.Join(wt.Path, ".state"))
	h.intact(t)
	// A sync (rebase onto the target) in the worktree touches nothing else.
	commitFile(t, h.repo, "main.txt", "main moved\n", "main moves")
	_, err := h.m.Merge(context.Background(), "evil", Request{Title: "t", Sync: true})
	require.ErrorIs(t, err, ErrProtectedPath)
	h.intact(t)
}

func TestNewRefusesAnUnsafeProtectedDirectory(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, repo string)
		cfg     func(c *Config)
		dir     string
		reason  string
	}{
		{"a symbolic link", func(t *testing.T, repo string) {
			require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(repo, ".state")))
		}, nil, ".state", "is a symbolic link"},
		{"reached through a symbolic link", func(t *testing.T, repo string) {
			require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(repo, "var")))
		}, func(c *Config) { c.Protected = []string{"var/state"} }, "var/state", "is reached through the symbolic link"},
		{"a worktree root that is a symbolic link", func(t *testing.T, repo string) {
			require.NoError(t, os.Symlink(t.TempDir(), filepath.Join(repo, ".worktrees")))
		}, func(c *Config) { c.Protected = nil }, ".worktrees", "is a symbolic link"},
		{"a file", func(t *testing.T, repo string) {
			writeFile(t, repo, ".state", "x\n")
		}, nil, ".state", "is not a directory"},
		{"tracked in the index", func(t *testing.T, repo string) {
			writeFile(t, repo, ".state/db", "x\n")
			git(t, repo, "add", "-f", ".state/db")
		}, nil, ".state", "is tracked by git: .state/db"},
		{"tracked on the target branch", func(t *testing.T, repo string) {
			other := filepath.Join(t.TempDir(), "wt")
			git(t, repo, "worktree", "add", "-q", "--detach", other, "main")
			commitFile(t, other, ".state", "x\n", "track it")
			git(t, other, "branch", "-f", "release", "HEAD")
		}, func(c *Config) { c.TargetBranch = "release" }, ".state", "is tracked by git: .state"},
		{"a tracked symbolic link", func(t *testing.T, repo string) {
			require.NoError(t, os.Symlink("/tmp", filepath.Join(repo, ".state")))
			git(t, repo, "add", ".state")
			git(t, repo, "commit", "-q", "-m", "link")
		}, nil, ".state", "is a symbolic link"},
		{"the working tree itself", nil, func(c *Config) { c.Protected = []string{"."} }, ".", "is the working tree itself"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			repo := newRepo(t, nil)
			if tc.prepare != nil {
				tc.prepare(t, repo)
			}
			cfg := Config{Repo: repo, Author: Identity(testIdentity), Protected: []string{".state"}}
			if tc.cfg != nil {
				tc.cfg(&cfg)
			}
			_, err := New(context.Background(), cfg)
			var uerr *UnsafeDirError
			require.ErrorAs(t, err, &uerr)
			assert.ErrorIs(t, err, ErrUnsafeDir)
			assert.Equal(t, filepath.Join(repo, tc.dir), uerr.Dir)
			assert.Contains(t, err.Error(), tc.reason)
		})
	}
}

func TestNewTakesProtectedDirectoriesOutsideTheRepositoryAsTheyAre(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	outside := t.TempDir()
	link := filepath.Join(t.TempDir(), "link")
	require.NoError(t, os.Symlink(outside, link))
	m := newManager(t, repo, func(c *Config) { c.Protected = []string{outside, link, "not/yet/made"} })
	assert.Equal(t, []string{".worktrees", "not/yet/made"}, m.protected)
}

func TestReadTreeAgreesWithGitLooseAndPacked(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{"a.txt": "a\n", "dir/b.txt": "b\n", "x": "x\n"})
	require.NoError(t, os.Symlink("a.txt", filepath.Join(repo, "link")))
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-q", "-m", "a link")
	m := newManager(t, repo, nil)
	m.protected = []string{"dir/b.txt", "link/y", "x"} // New would refuse them
	tree := revParse(t, repo, "HEAD^{tree}")
	want := []string{"dir/b.txt", "link", "x"}

	loose, err := m.readTree(ctx, tree)
	require.NoError(t, err)
	hits, err := m.protectedInTree(ctx, tree)
	require.NoError(t, err)
	assert.Equal(t, want, hits)

	git(t, repo, "gc", "-q", "--prune=now")
	_, ok := readLooseObject(m.commonDir, tree)
	require.False(t, ok, "the tree is packed now")
	packed, err := m.readTree(ctx, tree)
	require.NoError(t, err)
	assert.Equal(t, loose, packed, "ls-tree reads what the loose object holds")
	hits, err = m.protectedInTree(ctx, tree)
	require.NoError(t, err)
	assert.Equal(t, want, hits)
}
