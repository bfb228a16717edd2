package merge

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestCreateMakesWorktreeOnBranchFromBase(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "story-1")

	assert.True(t, filepath.IsAbs(wt.Path))
	assert.Equal(t, filepath.Join(repo, ".worktrees", "story-1"), wt.Path)
	assert.Equal(t, "foreman/story-1", wt.Branch)
	assert.Equal(t, revParse(t, repo, "main"), wt.Base)
	assert.Equal(t, "foreman/story-1", git(t, wt.Path, "branch", "--show-current"))
	assert.FileExists(t, filepath.Join(wt.Path, "README.md"))
	assert.Empty(t, porcelain(t, repo), "the worktree root is excluded from the main status")
	assert.Empty(t, porcelain(t, wt.Path))

	list, err := m.List(context.Background())
	require.NoError(t, err)
	assert.Equal(t, []Worktree{wt}, list)
}

func TestCreateIsIdempotentAndKeepsWork(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "a")
	head := commitFile(t, wt.Path, "work.txt", "w\n", "work")
	writeFile(t, wt.Path, "pending.txt", "uncommitted\n")
	commitFile(t, repo, "later.txt", "l\n", "main moves on")

	again := create(t, m, "a")
	assert.Equal(t, wt, again, "base stays the recorded one")
	assert.Equal(t, head, revParse(t, wt.Path, "HEAD"))
	assert.FileExists(t, filepath.Join(wt.Path, "pending.txt"))
}

func TestCreateRepairsStaleState(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name   string
		break_ func(t *testing.T, m *Manager, wt Worktree)
	}{
		{"directory deleted by hand", func(t *testing.T, m *Manager, wt Worktree) {
			require.NoError(t, os.RemoveAll(wt.Path))
		}},
		{"registration gone, directory left", func(t *testing.T, m *Manager, wt Worktree) {
			require.NoError(t, os.RemoveAll(filepath.Join(m.commonDir, "worktrees", "x")))
		}},
		{"half-made by a crashed add", func(t *testing.T, m *Manager, wt Worktree) {
			admin := filepath.Join(m.commonDir, "worktrees", "x")
			require.NoError(t, os.WriteFile(filepath.Join(admin, "locked"), []byte("initializing\n"), 0o644))
			require.NoError(t, os.Remove(filepath.Join(admin, "index")))
		}},
		{"garbage directory", func(t *testing.T, m *Manager, wt Worktree) {
			require.NoError(t, os.RemoveAll(wt.Path))
			require.NoError(t, os.RemoveAll(filepath.Join(m.commonDir, "worktrees", "x")))
			writeFile(t, wt.Path, "junk", "j")
		}},
		{"broken .git file", func(t *testing.T, m *Manager, wt Worktree) {
			writeFile(t, wt.Path, ".git", "gitdir: /nonexistent\n")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			repo := newRepo(t, nil)
			m := newManager(t, repo, nil)
			wt := create(t, m, "x")
			head := commitFile(t, wt.Path, "work.txt", "w\n", "work")
			tc.break_(t, m, wt)

			again := create(t, m, "x")
			assert.Equal(t, wt.Path, again.Path)
			assert.Equal(t, wt.Base, again.Base, "base recovered as the merge-base")
			assert.Equal(t, head, revParse(t, again.Path, "HEAD"), "the branch and its commits survive")
			assert.Empty(t, porcelain(t, again.Path))
			assert.NotContains(t, git(t, repo, "worktree", "list", "--porcelain"), "prunable")
			list, err := m.List(context.Background())
			require.NoError(t, err)
			require.Len(t, list, 1)
		})
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("missing worktree is fine", func(t *testing.T) {
		m := newManager(t, newRepo(t, nil), nil)
		assert.NoError(t, m.Remove(ctx, "never-made"))
	})
	t.Run("keeps the branch by default", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "k")
		head := commitFile(t, wt.Path, "f", "f\n", "f")
		require.NoError(t, m.Remove(ctx, "k"))
		assert.NoDirExists(t, wt.Path)
		assert.Equal(t, head, revParse(t, repo, "foreman/k"))
		assert.NotContains(t, git(t, repo, "worktree", "list"), wt.Path)
		require.NoError(t, m.Remove(ctx, "k"), "twice is fine")
	})
	t.Run("deletes the branch by option", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, func(c *Config) { c.DeleteBranchOnRemove = true })
		create(t, m, "d")
		require.NoError(t, m.Remove(ctx, "d"))
		assert.Empty(t, git(t, repo, "branch", "--list", "foreman/d"))
		require.NoError(t, m.Remove(ctx, "d"))
	})
	t.Run("never deletes a branch checked out elsewhere", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, func(c *Config) { c.DeleteBranchOnRemove = true })
		create(t, m, "e")
		require.NoError(t, m.Remove(ctx, "e"))
		git(t, repo, "branch", "foreman/e")
		other := filepath.Join(t.TempDir(), "other")
		git(t, repo, "worktree", "add", "-q", other, "foreman/e")
		require.NoError(t, m.Remove(ctx, "e"))
		assert.NotEmpty(t, git(t, repo, "branch", "--list", "foreman/e"))
	})
}

func TestPruneRemovesWhatKeepRejects(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	for _, id := range []foreman.ItemID{"a", "b", "c"} {
		create(t, m, id)
	}
	require.NoError(t, os.RemoveAll(filepath.Join(m.Root(), "c"))) // stale registration
	writeFile(t, filepath.Join(m.Root(), checkPrefix+"a"), "left", "over")

	removed, err := m.Prune(ctx, func(id foreman.ItemID) bool { return id == "a" })
	require.NoError(t, err)
	assert.Equal(t, []foreman.ItemID{"b"}, removed)
	list, err := m.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.Equal(t, foreman.ItemID("a"), list[0].ID)
	assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"a"))
	assert.NotContains(t, git(t, repo, "worktree", "list", "--porcelain"), "prunable")
}

func TestCustomRootPrefixAndBase(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	git(t, repo, "branch", "develop")
	root := filepath.Join(t.TempDir(), "trees")
	m := newManager(t, repo, func(c *Config) {
		c.Root, c.BranchPrefix, c.BaseBranch = root, "agents/run1", "develop"
	})
	wt := create(t, m, "s.1")
	assert.Equal(t, filepath.Join(root, "s.1"), wt.Path)
	assert.Equal(t, "agents/run1/s.1", wt.Branch)
	assert.Equal(t, "develop", m.Target())
	assert.Equal(t, revParse(t, repo, "develop"), wt.Base)
	data, _ := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	assert.NotContains(t, string(data), "trees", "a root outside the repository needs no exclude")

	_, err := New(context.Background(), Config{Repo: repo, BranchPrefix: "bad..prefix"})
	assert.Error(t, err)
	notRepo := t.TempDir()
	// The ceiling keeps git from finding a repository above a TMPDIR that lies in a work tree.
	_, err = New(context.Background(), Config{Repo: notRepo, GitEnv: []string{"GIT_CEILING_DIRECTORIES=" + filepath.Dir(notRepo)}})
	assert.Error(t, err)
	_, err = New(context.Background(), Config{})
	assert.Error(t, err)
}

// A git that records every invocation: bad ids must never reach it.
func recordingGit(t *testing.T) (*gitexec.Runner, string) {
	dir := t.TempDir()
	log := filepath.Join(dir, "calls")
	script := filepath.Join(dir, "git")
	require.NoError(t, os.WriteFile(script, []byte("#!/bin/sh\necho \"$@\" >> "+demo.ShellQuote(log)+"\nexec git \"$@\"\n"), 0o755))
	r := testRunner()
	r.Git = script
	return r, log
}

func TestBadIDsRejectedBeforeGitRuns(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.DeleteBranchOnRemove = true })
	r, log := recordingGit(t)
	m.git = r
	bad := []foreman.ItemID{"", "../escape", "-rf", "a/b", "a..b", ".hidden", "x.lock", "sp ace", foreman.ItemID(strings.Repeat("a", 65)), "--upload-pack=evil"}
	for _, id := range bad {
		t.Run(string(id), func(t *testing.T) {
			_, err := m.Create(ctx, id)
			assert.ErrorIs(t, err, foreman.ErrInvalidID)
			assert.ErrorIs(t, m.Remove(ctx, id), foreman.ErrInvalidID)
			_, err = m.Merge(ctx, id, Request{Title: "t"})
			assert.ErrorIs(t, err, foreman.ErrInvalidID)
			_, err = m.DiffStat(ctx, id)
			assert.ErrorIs(t, err, foreman.ErrInvalidID)
			_, err = m.Path(id)
			assert.ErrorIs(t, err, foreman.ErrInvalidID)
			_, err = m.Branch(id)
			assert.ErrorIs(t, err, foreman.ErrInvalidID)
		})
	}
	assert.NoFileExists(t, log, "git never ran")
	entries, _ := os.ReadDir(repo)
	for _, e := range entries {
		assert.NotEqual(t, "escape", e.Name())
	}
}

func TestNewFromALinkedWorktreeFindsTheMainOne(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	linked := filepath.Join(t.TempDir(), "linked")
	git(t, repo, "worktree", "add", "-q", "-b", "side", linked)
	m := newManager(t, filepath.Join(linked, "."), nil)
	assert.Equal(t, filepath.Join(repo, ".worktrees"), m.Root())
	wt := create(t, m, "from-linked")
	commitFile(t, wt.Path, "l.txt", "l\n", "l")
	res, err := m.Merge(context.Background(), "from-linked", Request{Title: "L"})
	require.NoError(t, err)
	assert.Equal(t, repo, res.CheckedOut)
	assert.Equal(t, res.Commit, revParse(t, repo, "main"))
}

// A `git worktree add` that fails after it has made the branch (as a crash
// would) is retried once, on the branch it left behind.
func TestCreateRetriesAFailedAdd(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	dir := t.TempDir()
	marker := filepath.Join(dir, "failed-once")
	script := filepath.Join(dir, "git")
	require.NoError(t, os.WriteFile(script, []byte(`#!/bin/sh
git "$@"; rc=$?
if [ "$1" = worktree ] && [ "$2" = add ] && [ ! -e `+demo.ShellQuote(marker)+` ]; then
  touch `+demo.ShellQuote(marker)+`; echo "fatal: simulated crash" >&2; exit 128
fi
exit $rc
`), 0o755))
	m.git.Git = script
	wt, err := m.Create(context.Background(), "retry")
	require.NoError(t, err)
	assert.FileExists(t, marker)
	assert.Equal(t, revParse(t, repo, "main"), wt.Base)
	assert.Equal(t, "foreman/retry", git(t, wt.Path, "branch", "--show-current"))
	assert.Empty(t, porcelain(t, wt.Path))
}

// A repository whose default branch is not the configured base is refused by
// New with a typed error naming the branch, not later by a raw git failure.
func TestNewRejectsAMissingBaseOrTargetBranch(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	git(t, repo, "branch", "-m", "main", "master")
	_, err := New(context.Background(), Config{Repo: repo})
	require.ErrorIs(t, err, ErrUnknownBranch)
	assert.ErrorContains(t, err, `"main"`)

	_, err = New(context.Background(), Config{Repo: repo, BaseBranch: "master", TargetBranch: "release"})
	require.ErrorIs(t, err, ErrUnknownBranch)
	assert.ErrorContains(t, err, `"release"`)

	m, err := New(context.Background(), Config{Repo: repo, BaseBranch: "master"})
	require.NoError(t, err)
	assert.Equal(t, "master", m.Target())
}

// A relative Root is taken against the main worktree, not against the
// process's working directory or the worktree Repo names, and every path
// handed out is absolute.
func TestRelativeRootIsTakenAgainstTheMainWorktree(t *testing.T) {
	ctx := context.Background()
	repo := newRepo(t, nil)
	linked := filepath.Join(t.TempDir(), "linked")
	git(t, repo, "worktree", "add", "-q", "-b", "side", linked)
	t.Chdir(t.TempDir())

	m := newManager(t, linked, func(c *Config) { c.Root = filepath.Join("agents", "trees") })
	assert.Equal(t, filepath.Join(repo, "agents", "trees"), m.Root())
	wt := create(t, m, "rel")
	assert.Equal(t, filepath.Join(repo, "agents", "trees", "rel"), wt.Path)
	assert.DirExists(t, wt.Path)
	list, err := m.List(ctx)
	require.NoError(t, err)
	require.Len(t, list, 1)
	assert.True(t, filepath.IsAbs(list[0].Path))
	assert.Equal(t, wt.Path, list[0].Path)
	data, _ := os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	assert.Contains(t, string(data), "/agents/trees/\n", "a root inside the repository is excluded")
	assert.Empty(t, porcelain(t, repo))
	commitFile(t, wt.Path, "rel.txt", "r\n", "r")
	res, err := m.Merge(ctx, "rel", Request{Title: "Rel"})
	require.NoError(t, err)
	assert.Equal(t, repo, res.CheckedOut)

	outside := newManager(t, repo, func(c *Config) { c.Root = filepath.Join("..", "beside") })
	assert.Equal(t, filepath.Join(filepath.Dir(repo), "beside"), outside.Root())
	wt = create(t, outside, "out")
	assert.Equal(t, filepath.Join(filepath.Dir(repo), "beside", "out"), wt.Path)
	data, _ = os.ReadFile(filepath.Join(repo, ".git", "info", "exclude"))
	assert.NotContains(t, string(data), "beside", "a root outside the repository needs no exclude")
}

// Removing a healthy worktree is routine: no "repairing stale worktree"
// warning (a newcomer saw one after every merge), and a stale one's
// registration is named once.
func TestRemoveOfAHealthyWorktreeWarnsOfNothing(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	var logs strings.Builder
	m := newManager(t, repo, func(c *Config) {
		c.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	})
	create(t, m, "story-1")
	require.NoError(t, m.Remove(context.Background(), "story-1"))
	assert.Empty(t, logs.String())

	wt := create(t, m, "story-2")
	require.NoError(t, os.Remove(filepath.Join(wt.Path, ".git"))) // broken
	create(t, m, "story-2")                                       // repairs it
	assert.Contains(t, logs.String(), "repairing stale worktree")
	assert.Equal(t, 1, strings.Count(logs.String(), filepath.Join(".git", "worktrees", "story-2")), logs.String())
}
