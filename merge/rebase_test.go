package merge

import (
	"context"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// assertNothingInProgress checks that the worktree at dir has no uncommitted
// change, no git operation in progress and no index or HEAD lock file.
func assertNothingInProgress(t *testing.T, dir string) {
	t.Helper()
	assert.Empty(t, porcelain(t, dir), "uncommitted changes in %s", dir)
	admin, healthy := inspectWorktree(dir)
	require.True(t, healthy)
	assert.Empty(t, inProgress(admin), "an operation in progress in %s", dir)
	for _, lock := range []string{"index.lock", "HEAD.lock"} {
		assert.NoFileExists(t, filepath.Join(admin, lock))
	}
}

func TestRebaseReplaysTheBranchOntoTheTarget(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "r")
	commitFile(t, wt.Path, "a.txt", "a\n", "the item's")
	tip := commitFile(t, repo, "b.txt", "b\n", "landed meanwhile")

	head, err := m.Rebase(context.Background(), "r", RebaseOptions{})
	require.NoError(t, err)
	assert.Equal(t, revParse(t, repo, "foreman/r"), head)
	assert.Equal(t, tip, revParse(t, repo, head+"^"), "one commit, on the target's tip")
	assert.FileExists(t, filepath.Join(wt.Path, "b.txt"))
	assertNothingInProgress(t, wt.Path)

	// Up to date: nothing changes.
	again, err := m.Rebase(context.Background(), "r", RebaseOptions{})
	require.NoError(t, err)
	assert.Equal(t, head, again)

	// And the rebased branch merges.
	res, err := m.Merge(context.Background(), "r", Request{Title: "R"})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
}

func TestARebaseThatConflictsIsAbortedWithBothSides(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "c")
	head := commitFile(t, wt.Path, "shared.txt", "one\ntwo-B\nthree\n", "B: two")
	commitFile(t, repo, "shared.txt", "one\ntwo-A\nthree\n", "A: two")

	_, err := m.Rebase(ctx, "c", RebaseOptions{})
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, "rebase", conflict.Stage)
	assert.Equal(t, "main", conflict.Target)
	assert.Equal(t, []string{"shared.txt"}, conflict.Files)
	require.Len(t, conflict.Conflicts, 1)
	f := conflict.Conflicts[0]
	assert.Equal(t, "shared.txt", f.Path)
	assert.False(t, f.Missing)
	assert.False(t, f.Clipped)
	require.Len(t, f.Hunks, 1)
	h := f.Hunks[0]
	assert.Equal(t, Hunk{Line: 1, Before: []string{"one"}, Target: []string{"two-A"}, Item: []string{"two-B"},
		After: []string{"three"}, Label: h.Label}, h)
	assert.Contains(t, h.Label, "(B: two)", "the replayed commit")

	assert.Equal(t, head, revParse(t, repo, "foreman/c"), "the branch is as it was")
	assert.Equal(t, "one\ntwo-B\nthree\n", readFile(t, wt.Path, "shared.txt"))
	assertNothingInProgress(t, wt.Path)
}

func TestARebaseReadsTheHunksOfSeveralFilesWithinBounds(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, map[string]string{
		"a.txt": "a1\na2\na3\na4\na5\na6\na7\na8\na9\na10\na11\na12\n",
		"b.txt": "b1\nb2\nb3\n",
		"r.txt": "r\n",
		"z.txt": "z\n",
	})
	git(t, repo, "config", "merge.conflictStyle", "diff3")
	m := newManager(t, repo, nil)
	wt := create(t, m, "s")
	writeFile(t, wt.Path, "a.txt", "a1\nA2-item\na3\na4\na5\na6\na7\na8\na9\na10\nA11-item\na12\n")
	writeFile(t, wt.Path, "b.txt", "b1\nB2-item\nb3\n")
	git(t, wt.Path, "mv", "r.txt", "r-item.txt")
	writeFile(t, wt.Path, "z.txt", "z-item\n")
	git(t, wt.Path, "add", "-A")
	git(t, wt.Path, "commit", "-qm", "the item's")
	writeFile(t, repo, "a.txt", "a1\nA2-main\na3\na4\na5\na6\na7\na8\na9\na10\nA11-main\na12\n")
	writeFile(t, repo, "b.txt", "b1\nB2-main\nb3\n")
	writeFile(t, repo, "z.txt", "z-main\n")
	git(t, repo, "mv", "r.txt", "r-main.txt")
	git(t, repo, "add", "-A")
	git(t, repo, "commit", "-qm", "main's")

	_, err := m.Rebase(ctx, "s", RebaseOptions{Context: 1, MaxFiles: 5})
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict)
	assert.Equal(t, []string{"a.txt", "b.txt", "r-item.txt", "r-main.txt", "r.txt", "z.txt"}, conflict.Files)
	require.Len(t, conflict.Conflicts, 5, "MaxFiles")
	a, b := conflict.Conflicts[0], conflict.Conflicts[1]
	require.Len(t, a.Hunks, 2, "two conflicts apart in a.txt")
	assert.Equal(t, []string{"a1"}, a.Hunks[0].Before)
	assert.Equal(t, []string{"A2-main"}, a.Hunks[0].Target)
	assert.Equal(t, []string{"a2"}, a.Hunks[0].Base, "diff3 style: the common ancestor's side too")
	assert.Equal(t, []string{"A2-item"}, a.Hunks[0].Item)
	assert.Equal(t, []string{"a10"}, a.Hunks[1].Before)
	assert.Equal(t, []string{"A11-main"}, a.Hunks[1].Target)
	assert.Equal(t, []string{"A11-item"}, a.Hunks[1].Item)
	assert.Greater(t, a.Hunks[1].Line, a.Hunks[0].End(), "apart")
	require.Len(t, b.Hunks, 1)
	assert.Equal(t, []string{"B2-item"}, b.Hunks[0].Item)
	// Renamed to two names: no markers in either, the old name gone.
	assert.Equal(t, ConflictFile{Path: "r-item.txt"}, conflict.Conflicts[2])
	assert.Equal(t, ConflictFile{Path: "r.txt", Missing: true}, conflict.Conflicts[4])
	assertNothingInProgress(t, wt.Path)

	// MaxFileBytes: the first hunk of a.txt fits, the second not; b.txt
	// has its own budget.
	_, err = m.Rebase(ctx, "s", RebaseOptions{Context: -1, MaxFileBytes: 100})
	require.ErrorAs(t, err, &conflict)
	a, b = conflict.Conflicts[0], conflict.Conflicts[1]
	require.Len(t, a.Hunks, 1)
	assert.True(t, a.Clipped)
	assert.Empty(t, a.Hunks[0].Before, "no context asked for")
	require.Len(t, b.Hunks, 1)
	assert.False(t, b.Clipped)
	assertNothingInProgress(t, wt.Path)
}

func TestRebaseRefusals(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "d")
	commitFile(t, wt.Path, "a.txt", "a\n", "the item's")
	commitFile(t, repo, "b.txt", "b\n", "landed meanwhile")
	head := revParse(t, repo, "foreman/d")

	writeFile(t, wt.Path, "README.md", "edited\n")
	_, err := m.Rebase(ctx, "d", RebaseOptions{})
	var dirty *DirtyError
	require.ErrorAs(t, err, &dirty)
	assert.ErrorIs(t, err, ErrUncommittedChanges)
	assert.Equal(t, []string{"README.md"}, dirty.Files)
	assert.Equal(t, "edited\n", readFile(t, wt.Path, "README.md"), "left as it was")
	git(t, wt.Path, "checkout", "-q", "README.md")

	git(t, wt.Path, "checkout", "-q", "--detach")
	_, err = m.Rebase(ctx, "d", RebaseOptions{})
	var refused *RebaseError
	require.ErrorAs(t, err, &refused)
	assert.Contains(t, err.Error(), "does not have the branch foreman/d checked out")
	git(t, wt.Path, "checkout", "-q", "foreman/d")

	_, err = m.Rebase(ctx, "never-made", RebaseOptions{})
	assert.ErrorIs(t, err, ErrNoWorktree)
	_, err = m.Rebase(ctx, "../escape", RebaseOptions{})
	assert.Error(t, err)
	assert.Equal(t, head, revParse(t, repo, "foreman/d"), "nothing rebased")
}

func TestRebaseAbortsARebaseACrashLeftFirst(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "l")
	head := commitFile(t, wt.Path, "shared.txt", "one\ntwo-B\nthree\n", "B: two")
	commitFile(t, repo, "shared.txt", "one\ntwo-A\nthree\n", "A: two")
	_, err := testRunner().Run(context.Background(), wt.Path, "rebase", "main")
	require.Error(t, err, "a conflict, left in progress")

	_, err = m.Rebase(context.Background(), "l", RebaseOptions{})
	var conflict *ConflictError
	require.ErrorAs(t, err, &conflict, "the leftover aborted, the rebase done again")
	assert.Equal(t, head, revParse(t, repo, "foreman/l"))
	assertNothingInProgress(t, wt.Path)
}

// git stopped while it wrote a rebase's state (before which a rebase
// changes nothing) leaves a state `git rebase --abort` cannot read: the
// next Rebase and Merge forget it.
func TestARebaseStoppedBeforeItWroteItsStateIsForgotten(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	for _, id := range []string{"rebased", "merged"} {
		wt := create(t, m, foreman.ItemID(id))
		commitFile(t, wt.Path, id+".txt", "x\n", "the item's")
		admin, _ := inspectWorktree(wt.Path)
		writeFile(t, admin, "rebase-merge/interactive", "") // the first file git writes
		require.Equal(t, "rebase", inProgress(admin))
	}
	commitFile(t, repo, "b.txt", "b\n", "landed meanwhile")

	_, err := m.Rebase(context.Background(), "rebased", RebaseOptions{})
	require.NoError(t, err)
	wt, err := m.Path("rebased")
	require.NoError(t, err)
	assertNothingInProgress(t, wt)
	_, err = m.Merge(context.Background(), "merged", Request{Title: "M"})
	require.NoError(t, err)
}

// A rebase stopped by its context half way leaves the worktree as it was:
// no rebase in progress and no lock file, even one the stopped git had
// not removed (git leaves a lock file it made an instant before the
// signal; the hook below leaves one every time).
func TestARebaseStoppedByItsContextLeavesNoRebaseAndNoLock(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "started")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	hooks := filepath.Join(dir, "hooks")
	// git rebase runs post-checkout once it has checked out the target,
	// its rebase in progress. The first run takes the index lock, says so
	// and waits to be stopped.
	writeFile(t, hooks, "post-checkout", `#!/bin/sh
[ -e "$0.ran" ] && exit 0
touch "$0.ran"
touch "$(git rev-parse --path-format=absolute --git-path index.lock)"
echo started > `+fifo+`
exec sleep 600
`)
	require.NoError(t, os.Chmod(filepath.Join(hooks, "post-checkout"), 0o755))
	m := newManager(t, repo, nil)
	wt := create(t, m, "k")
	head := commitFile(t, wt.Path, "a.txt", "a\n", "the item's")
	commitFile(t, repo, "b.txt", "b\n", "landed meanwhile")
	git(t, repo, "config", "core.hooksPath", hooks)

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := m.Rebase(ctx, "k", RebaseOptions{})
		done <- err
	}()
	started := written(fifo)
	select {
	case <-started:
	case err := <-done:
		t.Fatalf("the rebase ended before its hook ran: %v", err)
	}
	admin, _ := inspectWorktree(wt.Path)
	require.Equal(t, "rebase", inProgress(admin), "stopped half way")
	require.FileExists(t, filepath.Join(admin, "index.lock"))
	cancel()
	err := <-done
	require.ErrorIs(t, err, context.Canceled)

	assertNothingInProgress(t, wt.Path)
	assert.Equal(t, head, revParse(t, repo, "foreman/k"), "the branch is as it was")
	git(t, repo, "config", "--unset", "core.hooksPath")
	_, err = m.Merge(context.Background(), "k", Request{Title: "K"})
	require.NoError(t, err, "no lock file left in the next merge's way")
}

// A rebase git finished an instant before its context ended stands, and
// Rebase says so (the caller records a rebased branch as rebased).
func TestARebaseFinishedAsItsContextEndsStands(t *testing.T) {
	t.Parallel()
	realGit, err := exec.LookPath("git")
	require.NoError(t, err)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "finished")
	require.NoError(t, syscall.Mkfifo(fifo, 0o600))
	// git as Config.Git: the rebase runs, then, the first time, git
	// "exits" only when it is stopped.
	wrapper := filepath.Join(dir, "git")
	writeFile(t, dir, "git", `#!/bin/sh
`+realGit+` "$@" || exit
case " $* " in *" rebase -q "*) [ -e "$0.ran" ] || { touch "$0.ran"; echo finished > `+fifo+`; exec sleep 600; } ;; esac
`)
	require.NoError(t, os.Chmod(wrapper, 0o755))
	repo := newRepo(t, nil)
	m := newManager(t, repo, func(c *Config) { c.Git = wrapper })
	wt := create(t, m, "f")
	head := commitFile(t, wt.Path, "a.txt", "a\n", "the item's")
	tip := commitFile(t, repo, "b.txt", "b\n", "landed meanwhile")

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	type result struct {
		head string
		err  error
	}
	done := make(chan result, 1)
	go func() {
		h, err := m.Rebase(ctx, "f", RebaseOptions{})
		done <- result{h, err}
	}()
	finished := written(fifo)
	select {
	case <-finished:
	case r := <-done:
		t.Fatalf("Rebase returned before git finished: %v", r.err)
	}
	cancel()
	r := <-done
	require.NoError(t, r.err, "the rebase finished: it stands")
	assert.NotEqual(t, head, r.head)
	assert.Equal(t, revParse(t, repo, "foreman/f"), r.head)
	assert.Equal(t, tip, revParse(t, repo, r.head+"^"))
	assertNothingInProgress(t, wt.Path)
}

// written returns a channel closed once something has written to the FIFO
// at path and closed it.
func written(path string) <-chan struct{} {
	ch := make(chan struct{})
	go func() {
		if f, err := os.Open(path); err == nil {
			_, _ = io.Copy(io.Discard, f)
			f.Close()
			close(ch)
		}
	}()
	return ch
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return strings.ReplaceAll(string(data), "\r\n", "\n")
}
