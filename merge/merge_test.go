package merge

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestMergeSquashesOneCommitWithTrailer(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "story-7")
	commitFile(t, wt.Path, "a.txt", "a\n", "first")
	commitFile(t, wt.Path, "b.txt", "b\nb\n", "second")
	old := revParse(t, repo, "main")

	res, err := m.Merge(ctx, "story-7", Request{Title: "Add the\n letters", Body: "Two files.\nFor the report."})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
	assert.Equal(t, old, res.Previous)
	assert.Equal(t, repo, res.CheckedOut)
	assert.Equal(t, revParse(t, repo, "main"), res.Commit)
	assert.Equal(t, old, revParse(t, repo, "main^"), "one commit on top of the old tip")
	assert.Equal(t, "story-7: Add the letters\n\nTwo files.\nFor the report.\n\nForeman-Item: story-7",
		git(t, repo, "log", "-1", "--format=%B", "main"))
	assert.Equal(t, "story-7", git(t, repo, "log", "-1", "--format=%(trailers:key=Foreman-Item,valueonly)", "main"))
	assert.Equal(t, "Test", git(t, repo, "log", "-1", "--format=%an", "main"))
	assert.FileExists(t, filepath.Join(repo, "b.txt"), "the checked-out main follows")
	assert.Empty(t, porcelain(t, repo))
	assert.Empty(t, porcelain(t, wt.Path))

	stat, err := m.DiffStat(ctx, "story-7")
	require.NoError(t, err)
	assert.Equal(t, DiffStat{Files: 2, Insertions: 3}, stat)
	assert.Equal(t, "2 files changed, +3/-0", stat.String())
}

func TestMergePreconditions(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("nothing to merge", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		create(t, m, "n")
		_, err := m.Merge(ctx, "n", Request{Title: "t"})
		assert.ErrorIs(t, err, ErrNothingToMerge)
	})
	t.Run("changes already on target", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "n")
		commitFile(t, wt.Path, "same.txt", "s\n", "item")
		commitFile(t, repo, "same.txt", "s\n", "someone else")
		_, err := m.Merge(ctx, "n", Request{Title: "t"})
		assert.ErrorIs(t, err, ErrNothingToMerge)
	})
	t.Run("no branch", func(t *testing.T) {
		m := newManager(t, newRepo(t, nil), nil)
		_, err := m.Merge(ctx, "ghost", Request{Title: "t"})
		assert.ErrorIs(t, err, ErrNoBranch)
	})
	t.Run("uncommitted changes", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "d")
		commitFile(t, wt.Path, "c.txt", "c\n", "committed")
		writeFile(t, wt.Path, "new.txt", "untracked\n")
		writeFile(t, wt.Path, "README.md", "edited\n")
		old := revParse(t, repo, "main")

		_, err := m.Merge(ctx, "d", Request{Title: "t"})
		var dirty *DirtyError
		require.ErrorAs(t, err, &dirty)
		assert.ErrorIs(t, err, ErrUncommittedChanges)
		assert.False(t, dirty.Target)
		assert.ElementsMatch(t, []string{"new.txt", "README.md"}, dirty.Files)
		assert.Equal(t, old, revParse(t, repo, "main"))

		res, err := m.Merge(ctx, "d", Request{Title: "t", CommitPending: true})
		require.NoError(t, err)
		assert.Equal(t, Merged, res.Status)
		assert.Equal(t, "edited", strings.TrimSpace(git(t, repo, "show", "main:README.md")))
		assert.Equal(t, "untracked", git(t, repo, "show", "main:new.txt"))
		assert.Equal(t, "d: uncommitted work", git(t, wt.Path, "log", "-1", "--format=%s"))
		assert.Empty(t, porcelain(t, repo))
	})
}

func TestMergeIsIdempotent(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "once")
	commitFile(t, wt.Path, "o.txt", "o\n", "work")
	first, err := m.Merge(ctx, "once", Request{Title: "Once"})
	require.NoError(t, err)
	writeFile(t, wt.Path, "junk.txt", "left behind\n")

	again, err := m.Merge(ctx, "once", Request{Title: "Once", CommitPending: true})
	require.NoError(t, err)
	assert.Equal(t, AlreadyMerged, again.Status)
	assert.Equal(t, first.Commit, again.Commit)
	assert.Equal(t, first.Commit, revParse(t, repo, "main"))
	assert.Equal(t, "?? junk.txt", porcelain(t, wt.Path), "a retry commits nothing, even with CommitPending")

	// Other work lands on top, the worktree goes, a retry still finds it.
	other := create(t, m, "other")
	commitFile(t, other.Path, "x.txt", "x\n", "x")
	_, err = m.Merge(ctx, "other", Request{Title: "Other"})
	require.NoError(t, err)
	require.NoError(t, m.Remove(ctx, "once"))
	retry, err := m.Merge(ctx, "once", Request{Title: "Once"})
	require.NoError(t, err)
	assert.Equal(t, AlreadyMerged, retry.Status)
	assert.Equal(t, first.Commit, retry.Commit)
	assert.Equal(t, "1", git(t, repo, "rev-list", "--count", "--grep=^Foreman-Item: once$", "main"))
}

func TestMergeConflictChangesNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "clash")
	commitFile(t, wt.Path, "shared.txt", "one\nITEM\nthree\n", "item edit")
	commitFile(t, wt.Path, "only-item.txt", "i\n", "item file")
	commitFile(t, repo, "shared.txt", "one\nMAIN\nthree\n", "main edit")
	mainBefore, itemBefore := revParse(t, repo, "main"), revParse(t, wt.Path, "HEAD")
	// merge-tree may leave unreachable objects behind (git gc drops them), so
	// "nothing changed" is judged on what is reachable: refs and worktrees.
	refsBefore := git(t, repo, "for-each-ref", "--format=%(refname) %(objectname)")
	worktreesBefore := git(t, repo, "worktree", "list", "--porcelain")

	for _, sync := range []bool{false, true} {
		_, err := m.Merge(ctx, "clash", Request{Title: "t", Sync: sync})
		var conflict *ConflictError
		require.ErrorAs(t, err, &conflict, "sync=%v", sync)
		assert.Equal(t, []string{"shared.txt"}, conflict.Files)
		assert.Equal(t, foreman.ItemID("clash"), conflict.Item)
		if sync {
			assert.Equal(t, "sync", conflict.Stage)
		} else {
			assert.Equal(t, "squash", conflict.Stage)
		}
		assert.Contains(t, err.Error(), "shared.txt")
		assert.Equal(t, mainBefore, revParse(t, repo, "main"))
		assert.Equal(t, itemBefore, revParse(t, wt.Path, "HEAD"))
		assert.Equal(t, itemBefore, revParse(t, repo, "foreman/clash"))
		assert.Empty(t, porcelain(t, repo))
		assert.Empty(t, porcelain(t, wt.Path))
		assert.NoFileExists(t, filepath.Join(repo, ".git", "worktrees", "clash", "MERGE_HEAD"))
		assert.NoDirExists(t, filepath.Join(repo, ".git", "worktrees", "clash", "rebase-merge"))
		assert.Equal(t, refsBefore, git(t, repo, "for-each-ref", "--format=%(refname) %(objectname)"), "no ref made or moved")
		assert.Equal(t, worktreesBefore, git(t, repo, "worktree", "list", "--porcelain"), "no worktree made or left")
	}
}

func TestMergeWhereverTheTargetIsCheckedOut(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		setup func(t *testing.T, repo string) (checkout string)
	}{
		{"in the main worktree", func(t *testing.T, repo string) string { return repo }},
		{"in another worktree", func(t *testing.T, repo string) string {
			git(t, repo, "checkout", "-q", "-b", "dev")
			other := filepath.Join(t.TempDir(), "main-checkout")
			git(t, repo, "worktree", "add", "-q", other, "main")
			return other
		}},
		{"nowhere", func(t *testing.T, repo string) string {
			git(t, repo, "checkout", "-q", "-b", "dev")
			return ""
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo := newRepo(t, nil)
			checkout := tc.setup(t, repo)
			m := newManager(t, repo, nil)
			wt := create(t, m, "w")
			commitFile(t, wt.Path, "w.txt", "w\n", "w")
			old := revParse(t, repo, "main")

			res, err := m.Merge(ctx, "w", Request{Title: "W"})
			require.NoError(t, err)
			assert.Equal(t, checkout, res.CheckedOut)
			assert.Equal(t, res.Commit, revParse(t, repo, "main"))
			assert.Equal(t, old, revParse(t, repo, "main^"))
			if checkout != "" {
				assert.FileExists(t, filepath.Join(checkout, "w.txt"))
				assert.Empty(t, porcelain(t, checkout))
			}
			assert.Empty(t, porcelain(t, repo))
		})
	}
}

func TestMergeRefusesToOverwriteTargetCheckout(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "t")
	commitFile(t, wt.Path, "README.md", "item\n", "item edits README")
	writeFile(t, repo, "README.md", "local edit in main\n")
	old := revParse(t, repo, "main")

	_, err := m.Merge(ctx, "t", Request{Title: "T"})
	var dirty *DirtyError
	require.ErrorAs(t, err, &dirty)
	assert.True(t, dirty.Target)
	assert.Equal(t, repo, dirty.Path)
	assert.Equal(t, []string{"README.md"}, dirty.Files)
	assert.Equal(t, old, revParse(t, repo, "main"))
	assert.Equal(t, "M README.md", git(t, repo, "status", "--porcelain", "--untracked-files=no"))
	data, _ := os.ReadFile(filepath.Join(repo, "README.md"))
	assert.Equal(t, "local edit in main\n", string(data), "the local change survives")

	// Local changes the merge does not touch are carried, as git merge does.
	writeFile(t, repo, "README.md", "hello\n")
	writeFile(t, repo, "shared.txt", "local\n")
	res, err := m.Merge(ctx, "t", Request{Title: "T"})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
	assert.Equal(t, "M shared.txt", git(t, repo, "status", "--porcelain"))
	assert.Equal(t, "item", git(t, repo, "show", "main:README.md"))

	// Stricter by option: any local change refuses.
	strict := newManager(t, repo, func(c *Config) { c.RequireCleanTarget = true })
	wt2 := create(t, strict, "t2")
	commitFile(t, wt2.Path, "t2.txt", "t2\n", "t2")
	writeFile(t, repo, "untracked.txt", "u\n")
	before := revParse(t, repo, "main")
	_, err = strict.Merge(ctx, "t2", Request{Title: "T2"})
	require.ErrorAs(t, err, &dirty)
	assert.True(t, dirty.Target)
	assert.ElementsMatch(t, []string{"shared.txt", "untracked.txt"}, dirty.Files)
	assert.Equal(t, before, revParse(t, repo, "main"))
}

func TestMergeSyncRebasesOrFallsBackToMerge(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("rebase", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "r")
		commitFile(t, wt.Path, "r.txt", "r\n", "item")
		mainTip := commitFile(t, repo, "m.txt", "m\n", "main moves")
		res, err := m.Merge(ctx, "r", Request{Title: "R", Sync: true})
		require.NoError(t, err)
		assert.True(t, res.Synced)
		assert.Equal(t, mainTip, revParse(t, wt.Path, "HEAD^"), "the branch was rebased onto main")
		assert.Empty(t, git(t, wt.Path, "rev-list", "--merges", mainTip+"..HEAD"), "no merge commit")
	})
	t.Run("merge fallback", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "f")
		// The first commit conflicts with main when replayed; the branch as a
		// whole does not, so a merge succeeds where the rebase cannot.
		commitFile(t, wt.Path, "shared.txt", "one\nITEM\nthree\n", "try")
		commitFile(t, wt.Path, "shared.txt", "one\ntwo\nthree\n", "undo")
		commitFile(t, wt.Path, "f.txt", "f\n", "real work")
		mainTip := commitFile(t, repo, "shared.txt", "one\nMAIN\nthree\n", "main edit")
		res, err := m.Merge(ctx, "f", Request{Title: "F", Sync: true})
		require.NoError(t, err)
		assert.True(t, res.Synced)
		parents := strings.Fields(git(t, wt.Path, "log", "-1", "--format=%P"))
		assert.Len(t, parents, 2, "synced by a merge commit")
		assert.Contains(t, parents, mainTip)
		assert.Equal(t, "one\nMAIN\nthree", git(t, repo, "show", "main:shared.txt"))
		assert.Empty(t, porcelain(t, wt.Path))
		stat, err := m.DiffStat(ctx, "f")
		require.NoError(t, err)
		assert.Equal(t, DiffStat{Files: 1, Insertions: 1}, stat, "measured from where the item last met main")
	})
}

func TestMergeCheck(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "c")
	commitFile(t, wt.Path, "c.txt", "c\n", "c")
	old := revParse(t, repo, "main")

	_, err := m.Merge(ctx, "c", Request{Title: "C", Check: []string{"sh", "-c", "test -f c.txt && echo broken >&2 && exit 3"}})
	var cerr *CheckError
	require.ErrorAs(t, err, &cerr)
	assert.Equal(t, 3, cerr.ExitCode)
	assert.Contains(t, cerr.Output, "broken")
	assert.Equal(t, old, revParse(t, repo, "main"), "the target stays where it was")
	assert.Empty(t, porcelain(t, repo))
	assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"c"))
	assert.NotContains(t, git(t, repo, "worktree", "list"), checkPrefix)

	res, err := m.Merge(ctx, "c", Request{Title: "C", Check: []string{"sh", "-c", `test -f c.txt && test "$FOREMAN_ITEM" = c`}})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
	assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"c"))
}

func TestMergePushVerifiesRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	remote := filepath.Join(t.TempDir(), "remote.git")
	git(t, repo, "init", "-q", "--bare", "-b", "main", remote)
	git(t, repo, "remote", "add", "origin", remote)
	git(t, repo, "push", "-q", "origin", "main")
	m := newManager(t, repo, nil)
	wt := create(t, m, "p")
	commitFile(t, wt.Path, "p.txt", "p\n", "p")

	res, err := m.Merge(ctx, "p", Request{Title: "P", Push: true})
	require.NoError(t, err)
	assert.True(t, res.Pushed)
	assert.Equal(t, res.Commit, revParse(t, remote, "main"))

	again, err := m.Merge(ctx, "p", Request{Title: "P", Push: true})
	require.NoError(t, err)
	assert.Equal(t, AlreadyMerged, again.Status)
	assert.True(t, again.Pushed)

	// The remote moved on elsewhere: the push is refused, the local merge stands.
	elsewhere := filepath.Join(t.TempDir(), "elsewhere")
	git(t, repo, "clone", "-q", remote, elsewhere)
	commitFile(t, elsewhere, "e.txt", "e\n", "elsewhere")
	git(t, elsewhere, "push", "-q", "origin", "main")
	wt2 := create(t, m, "q")
	commitFile(t, wt2.Path, "q.txt", "q\n", "q")
	res, err = m.Merge(ctx, "q", Request{Title: "Q", Push: true})
	var perr *PushError
	require.ErrorAs(t, err, &perr)
	assert.Equal(t, Merged, res.Status)
	assert.False(t, res.Pushed)
	assert.Equal(t, res.Commit, revParse(t, repo, "main"))
	assert.NotEqual(t, res.Commit, revParse(t, remote, "main"))
}

// Eight items merged twice each at once (sixteen with FOREMAN_STRESS=1), from
// two Managers.
func TestConcurrentMergesLandOnceEachOnALinearMain(t *testing.T) {
	stress.Long(t) // concurrency by repetition; TestMergeIsIdempotent keeps the duplicate in the quick tier
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	m2 := newManager(t, repo, nil) // a second Manager shares only the file lock
	n := stress.Size(8, 16)
	ids := make([]foreman.ItemID, n)
	for i := range ids {
		ids[i] = foreman.ItemID(fmt.Sprintf("item-%02d", i))
		wt := create(t, m, ids[i])
		commitFile(t, wt.Path, fmt.Sprintf("f%02d.txt", i), "x\n", "work")
	}
	base := revParse(t, repo, "main")

	// Each item is merged twice at once: the duplicate must be recognised.
	var wg sync.WaitGroup
	results := make([]Result, 2*n)
	errs := make([]error, 2*n)
	for i := range 2 * n {
		wg.Go(func() {
			mgr := m
			if i%3 == 0 {
				mgr = m2
			}
			results[i], errs[i] = mgr.Merge(ctx, ids[i%n], Request{Title: "concurrent"})
		})
	}
	wg.Wait()
	merged := map[foreman.ItemID]string{}
	for i := range 2 * n {
		require.NoError(t, errs[i])
		if results[i].Status == Merged {
			_, dup := merged[ids[i%n]]
			assert.False(t, dup, "%s merged twice", ids[i%n])
			merged[ids[i%n]] = results[i].Commit
		}
	}
	assert.Len(t, merged, n)
	for i := range 2 * n {
		assert.Equal(t, merged[ids[i%n]], results[i].Commit)
	}

	assert.Equal(t, fmt.Sprint(n), git(t, repo, "rev-list", "--count", base+"..main"))
	assert.Empty(t, git(t, repo, "rev-list", "--merges", base+"..main"), "linear")
	trailers := strings.Fields(git(t, repo, "log", "--format=%(trailers:key=Foreman-Item,valueonly)", base+"..main"))
	assert.ElementsMatch(t, ids, func() []foreman.ItemID {
		out := make([]foreman.ItemID, len(trailers))
		for i, tr := range trailers {
			out[i] = foreman.ItemID(tr)
		}
		return out
	}())
	assert.Empty(t, porcelain(t, repo))
	for i := range n {
		assert.FileExists(t, filepath.Join(repo, fmt.Sprintf("f%02d.txt", i)))
	}
}
