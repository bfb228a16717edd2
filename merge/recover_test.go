package merge

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// crashed leaves an item worktree the way a crash in the middle of an
// operation would, then expects the next Merge to repair it and land.
func TestMergeRecoversCrashLeftoversInItemWorktree(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name  string
		crash func(t *testing.T, repo, wt string)
	}{
		{"MERGE_HEAD", func(t *testing.T, repo, wt string) {
			sideBranch(t, repo)
			_, err := testRunner().Run(context.Background(), wt, "merge", "side")
			require.Error(t, err, "conflicts")
			require.FileExists(t, filepath.Join(repo, ".git", "worktrees", "x", "MERGE_HEAD"))
		}},
		{"rebase in progress", func(t *testing.T, repo, wt string) {
			sideBranch(t, repo)
			_, err := testRunner().Run(context.Background(), wt, "rebase", "side")
			require.Error(t, err, "conflicts")
			require.DirExists(t, filepath.Join(repo, ".git", "worktrees", "x", "rebase-merge"))
		}},
		{"stale index.lock", func(t *testing.T, repo, wt string) {
			lock := filepath.Join(repo, ".git", "worktrees", "x", "index.lock")
			writeFile(t, filepath.Dir(lock), "index.lock", "")
			old := time.Now().Add(-time.Hour)
			require.NoError(t, os.Chtimes(lock, old, old))
		}},
		{"stale ref lock on the target", func(t *testing.T, repo, wt string) {
			lock := filepath.Join(repo, ".git", "refs", "heads", "main.lock")
			writeFile(t, filepath.Dir(lock), "main.lock", "")
			old := time.Now().Add(-time.Hour)
			require.NoError(t, os.Chtimes(lock, old, old))
		}},
		{"half-made worktree", func(t *testing.T, repo, wt string) {
			admin := filepath.Join(repo, ".git", "worktrees", "x")
			writeFile(t, admin, "locked", "initializing")
			require.NoError(t, os.Remove(filepath.Join(admin, "index")))
		}},
		{"interrupted post-merge check", func(t *testing.T, repo, wt string) {
			git(t, repo, "worktree", "add", "-q", "--detach", filepath.Join(repo, ".worktrees", checkPrefix+"x"), "main")
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			repo := newRepo(t, nil)
			m := newManager(t, repo, nil)
			wt := create(t, m, "x")
			head := commitFile(t, wt.Path, "shared.txt", "one\nITEM\nthree\n", "item edit")
			tc.crash(t, repo, wt.Path)

			res, err := m.Merge(ctx, "x", Request{Title: "X"})
			require.NoError(t, err)
			assert.Equal(t, Merged, res.Status)
			assert.Equal(t, "x", git(t, repo, "log", "-1", "--format=%(trailers:key=Foreman-Item,valueonly)", "main"))
			assert.Empty(t, porcelain(t, repo))
			if _, err := os.Stat(wt.Path); err == nil {
				assert.Equal(t, head, revParse(t, wt.Path, "HEAD"))
				assert.Empty(t, porcelain(t, wt.Path))
			}
			assert.NoDirExists(t, filepath.Join(m.Root(), checkPrefix+"x"))
			assert.NoFileExists(t, filepath.Join(repo, ".git", "refs", "heads", "main.lock"))
		})
	}
}

func TestMergeReportsLeftoversItMustNotTouch(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	t.Run("fresh index.lock", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "x")
		commitFile(t, wt.Path, "x.txt", "x\n", "x")
		lock := filepath.Join(repo, ".git", "worktrees", "x", "index.lock")
		writeFile(t, filepath.Dir(lock), "index.lock", "")
		old := revParse(t, repo, "main")

		_, err := m.Merge(ctx, "x", Request{Title: "X"})
		var lerr *LockedError
		require.ErrorAs(t, err, &lerr)
		assert.ErrorIs(t, err, ErrLocked)
		assert.Equal(t, lock, lerr.Path)
		assert.Equal(t, old, revParse(t, repo, "main"))

		// The same lock, seen later by a clock past StaleLockAge, is a leftover.
		m.clk = newFakeClockAt(time.Now().Add(time.Hour))
		_, err = m.Merge(ctx, "x", Request{Title: "X"})
		require.NoError(t, err)
	})
	t.Run("target being rebased in a checkout", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "x")
		commitFile(t, wt.Path, "x.txt", "x\n", "x")
		sideBranch(t, repo)
		commitFile(t, repo, "shared.txt", "one\nMAIN\nthree\n", "main")
		_, err := testRunner().Run(ctx, repo, "rebase", "side")
		require.Error(t, err, "conflicts, main stays mid-rebase")
		before := revParse(t, repo, "refs/heads/main")

		_, err = m.Merge(ctx, "x", Request{Title: "X"})
		var ip *InProgressError
		require.ErrorAs(t, err, &ip)
		assert.Equal(t, "rebase", ip.Operation)
		assert.Equal(t, before, revParse(t, repo, "refs/heads/main"))
	})
	t.Run("merge in progress in the target checkout", func(t *testing.T) {
		repo := newRepo(t, nil)
		m := newManager(t, repo, nil)
		wt := create(t, m, "x")
		commitFile(t, wt.Path, "x.txt", "x\n", "x")
		git(t, repo, "checkout", "-q", "-b", "side")
		commitFile(t, repo, "shared.txt", "one\nSIDE\nthree\n", "side")
		git(t, repo, "checkout", "-q", "main")
		commitFile(t, repo, "shared.txt", "one\nMAIN\nthree\n", "main")
		_, err := testRunner().Run(ctx, repo, "merge", "side")
		require.Error(t, err)
		before := revParse(t, repo, "main")
		status := porcelain(t, repo)

		_, err = m.Merge(ctx, "x", Request{Title: "X"})
		var ip *InProgressError
		require.ErrorAs(t, err, &ip)
		assert.Equal(t, "merge", ip.Operation)
		assert.Equal(t, repo, ip.Path)
		assert.Equal(t, before, revParse(t, repo, "main"))
		assert.Equal(t, status, porcelain(t, repo), "someone else's merge is left alone")
		assert.FileExists(t, filepath.Join(repo, ".git", "MERGE_HEAD"))
	})
}

// sideBranch makes a branch "side" whose edit conflicts with the item's,
// without moving main.
func sideBranch(t *testing.T, repo string) {
	side := filepath.Join(t.TempDir(), "side")
	git(t, repo, "worktree", "add", "-q", "-b", "side", side, "main")
	commitFile(t, side, "shared.txt", "one\nSIDE\nthree\n", "side edit")
	git(t, repo, "worktree", "remove", "--force", side)
}
