package merge

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeWithoutWorktreeMergesTheBranch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "gone")
	commitFile(t, wt.Path, "g.txt", "g\n", "g")
	require.NoError(t, m.Remove(ctx, "gone"))

	res, err := m.Merge(ctx, "gone", Request{Title: "G", Sync: true})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
	assert.False(t, res.Synced, "no worktree to sync in")
	assert.Equal(t, "g", git(t, repo, "show", "main:g.txt"))
	stat, err := m.DiffStat(ctx, "gone")
	require.NoError(t, err)
	assert.Equal(t, 1, stat.Files)
	_, err = m.DiffStat(ctx, "never")
	assert.ErrorIs(t, err, ErrNoBranch)
}

// After `git gc` refs live in packed-refs and objects in packs: the direct
// readers must fall back to git and everything still works.
func TestMergeAfterGC(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "a")
	commitFile(t, wt.Path, "a.txt", "a\n", "a")
	first, err := m.Merge(ctx, "a", Request{Title: "A"})
	require.NoError(t, err)
	git(t, repo, "gc", "-q", "--prune=now")
	require.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main"))

	again, err := m.Merge(ctx, "a", Request{Title: "A"})
	require.NoError(t, err)
	assert.Equal(t, AlreadyMerged, again.Status)
	assert.Equal(t, first.Commit, again.Commit)

	wt2 := create(t, m, "b")
	assert.Equal(t, first.Commit, wt2.Base)
	commitFile(t, wt2.Path, "b.txt", "b\n", "b")
	res, err := m.Merge(ctx, "b", Request{Title: "B"})
	require.NoError(t, err)
	assert.Equal(t, first.Commit, res.Previous)
}

func TestPushToAMissingRemoteIsAPushError(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.Remote = "nowhere" })
	wt := create(t, m, "p")
	commitFile(t, wt.Path, "p.txt", "p\n", "p")
	res, err := m.Merge(ctx, "p", Request{Title: "P", Push: true})
	var perr *PushError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, "nowhere", perr.Remote)
	assert.Error(t, errors.Unwrap(perr))
	assert.Contains(t, err.Error(), "push refs/heads/main to nowhere")
	assert.Equal(t, Merged, res.Status)
	assert.False(t, res.Pushed)
}

func TestErrorsDescribeThemselves(t *testing.T) {
	t.Parallel()
	cases := []struct {
		err  error
		want []string
		is   error
	}{
		{&ConflictError{Item: "x", Target: "main", Stage: "squash", Files: []string{"a", "b"}}, []string{"x conflicts with main", "a, b"}, nil},
		{&DirtyError{Path: "/w", Files: []string{"f"}}, []string{"item worktree /w", "f"}, ErrUncommittedChanges},
		{&DirtyError{Path: "/m", Target: true, Files: []string{"f"}}, []string{"checkout of the target branch /m"}, ErrUncommittedChanges},
		{&InProgressError{Path: "/m", Operation: "rebase"}, []string{"/m has a rebase in progress"}, nil},
		{&LockedError{Path: "/l"}, []string{"/l exists"}, ErrLocked},
		{&CheckError{Item: "x", Command: []string{"make", "test"}, ExitCode: 2, Output: "boom", Err: os.ErrClosed}, []string{`"make test"`, "exit 2", "boom"}, os.ErrClosed},
		{&PushError{Remote: "origin", Ref: "refs/heads/main", Want: "a", Got: "b"}, []string{`remote has "b", want a`}, nil},
		{&VerifyError{Target: "main", Want: "a", Got: "b", Reason: "moved"}, []string{"verify main: moved"}, nil},
	}
	for _, tc := range cases {
		for _, w := range tc.want {
			assert.Contains(t, tc.err.Error(), w)
		}
		if tc.is != nil {
			assert.ErrorIs(t, tc.err, tc.is)
		}
	}
	assert.Equal(t, "…6789", tail("0123456789", 4))
	assert.Equal(t, "already-merged", AlreadyMerged.String())
	assert.Equal(t, "Status(9)", Status(9).String())
}

func TestAutoMaintenanceRunsEveryFewMerges(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	r, log := recordingGit(t)
	m.git = r
	for i, id := range []foreman.ItemID{"m1", "m2"} {
		wt := create(t, m, id)
		commitFile(t, wt.Path, string(id)+".txt", "x\n", "x")
		if i == 1 {
			m.merges = maintainEvery - 1
		}
		_, err := m.Merge(ctx, id, Request{Title: "M"})
		require.NoError(t, err)
		data, _ := os.ReadFile(log)
		assert.Equal(t, i == 1, strings.Contains(string(data), "maintenance run --auto"), "merge %d", i)
	}
}

func TestBaseAndTargetMayDiffer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	git(t, repo, "branch", "develop")
	git(t, repo, "branch", "release")
	commitFile(t, repo, "main-only.txt", "m\n", "main moves")
	m := newManager(t, repo, func(c *Config) { c.BaseBranch, c.TargetBranch = "develop", "release" })
	wt := create(t, m, "r")
	assert.Equal(t, revParse(t, repo, "develop"), wt.Base)
	commitFile(t, wt.Path, "r.txt", "r\n", "r")
	mainBefore, releaseBefore := revParse(t, repo, "main"), revParse(t, repo, "release")

	res, err := m.Merge(ctx, "r", Request{Title: "R"})
	require.NoError(t, err)
	assert.Equal(t, "release", res.Target)
	assert.Empty(t, res.CheckedOut)
	assert.Equal(t, releaseBefore, revParse(t, repo, "release^"))
	assert.Equal(t, res.Commit, revParse(t, repo, "release"))
	assert.Equal(t, mainBefore, revParse(t, repo, "main"))
	assert.Empty(t, porcelain(t, repo))
}
