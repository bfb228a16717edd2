package merge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman"
)

// RebaseOptions bounds what Rebase reads of a conflict for a person or an
// agent. The zero value of every field means its default.
type RebaseOptions struct {
	// Context is how many unmarked lines around each conflict are kept;
	// negative keeps none. Default: 3.
	Context int
	// MaxFiles is how many conflicting files are read. Default: 8.
	MaxFiles int
	// MaxFileBytes bounds the lines kept of one file. Default: 2000.
	MaxFileBytes int
	// MaxBytes bounds the lines kept of all the files. Default: 8000.
	MaxBytes int
}

func (o RebaseOptions) bounds() conflictBounds {
	b := conflictBounds{context: o.Context, files: o.MaxFiles, fileBytes: o.MaxFileBytes, bytes: o.MaxBytes}
	switch {
	case b.context == 0:
		b.context = 3
	case b.context < 0:
		b.context = 0
	}
	if b.files <= 0 {
		b.files = 8
	}
	if b.fileBytes <= 0 {
		b.fileBytes = 2000
	}
	if b.bytes <= 0 {
		b.bytes = 8000
	}
	return b
}

// Rebase rebases the item's branch onto the target branch in the item's
// worktree and returns the branch's new head. It holds the repository
// lock, so that no Merge meets the rebase half way.
//
// It first repairs what a crash left in the worktree, as Merge does (an
// operation in progress aborted, a stale git lock file removed; a young
// one is *LockedError). Then:
//   - the branch's commits are replayed onto the target's tip (hooks
//     before the rebase are not run), and its new head is returned;
//   - *ConflictError with Stage "rebase": a commit of the branch conflicts
//     with the target. Files are the conflicting files and Conflicts both
//     sides of each, read before the rebase was aborted (bounded by opts).
//     The branch and the worktree are as they were;
//   - *RebaseError: git stopped the rebase with no conflicting file (its
//     error says why), or the worktree does not have the item's branch
//     checked out. Aborted likewise;
//   - *DirtyError: the worktree has uncommitted changes; nothing was done;
//   - ErrNoWorktree: the item has no worktree, or a broken one.
//
// When ctx ends while git rebases, git is stopped (SIGTERM to its process
// group) and the worktree put back before ctx's error is returned: the lock
// files the stopped git may have left are removed and the rebase it left
// in progress is aborted, on a context that does not end with ctx (bounded
// by Config.StaleLockAge), so the branch is as it was. Only a rebase git
// finished before it could be stopped stands: its new head is returned.
func (m *Manager) Rebase(ctx context.Context, id foreman.ItemID, opts RebaseOptions) (string, error) {
	path, err := m.Path(id)
	if err != nil {
		return "", err
	}
	var head string
	err = m.withLock(ctx, func() error {
		var err error
		head, err = m.rebaseLocked(ctx, id, path, opts.bounds())
		return err
	})
	return head, err
}

func (m *Manager) rebaseLocked(ctx context.Context, id foreman.ItemID, path string, b conflictBounds) (string, error) {
	admin, healthy := inspectWorktree(path)
	if !healthy {
		return "", fmt.Errorf("%w: %s", ErrNoWorktree, path)
	}
	if err := m.recoverItemWorktree(ctx, path, admin); err != nil {
		return "", err
	}
	branch := m.cfg.BranchPrefix + "/" + string(id)
	status, err := m.git.Run(ctx, path, "--no-optional-locks", "status", "--porcelain=v2", "--branch", "-z")
	if err != nil {
		return "", err
	}
	before, onBranch, files := parseStatus(status, "refs/heads/"+branch)
	if len(files) > 0 {
		return "", &DirtyError{Path: path, Files: files}
	}
	if !onBranch {
		return "", &RebaseError{Item: id, Target: m.cfg.TargetBranch, Reason: "its worktree does not have the branch " + branch + " checked out"}
	}
	tip, err := m.resolveRef(ctx, m.target)
	if err != nil {
		return "", err
	}
	if tip == "" {
		return "", fmt.Errorf("merge: target branch %s does not exist", m.cfg.TargetBranch)
	}
	stop, err := m.rebaseIn(ctx, id, path, admin, tip, &b)
	switch {
	case err != nil && ctx.Err() != nil:
		// git may have finished an instant before it was stopped: then
		// the rebase stands, and is what happened.
		if head, ok := m.rebasedAnyway(ctx, path, admin, "refs/heads/"+branch, before); ok {
			m.log.Info("merge: rebased as its context ended", "item", id, "target", m.cfg.TargetBranch, "onto", tip, "head", head)
			return head, nil
		}
		return "", err
	case err != nil:
		return "", err
	case stop != nil && len(stop.files) > 0:
		return "", &ConflictError{Item: id, Target: m.cfg.TargetBranch, Stage: "rebase", Files: stop.files, Conflicts: stop.conflicts}
	case stop != nil:
		return "", &RebaseError{Item: id, Target: m.cfg.TargetBranch, Reason: "git stopped the rebase", Err: stop.err}
	}
	head, err := m.worktreeHead(ctx, path)
	if err == nil {
		m.log.Info("merge: rebased", "item", id, "target", m.cfg.TargetBranch, "onto", tip, "head", head)
	}
	return head, err
}

// rebasedAnyway says whether a rebase that was stopped had finished first:
// nothing in progress in the worktree, and its branch checked out at a
// commit other than before.
func (m *Manager) rebasedAnyway(ctx context.Context, path, admin, branchRef, before string) (head string, ok bool) {
	if inProgress(admin) != "" {
		return "", false
	}
	_ = m.settled(ctx, func(ctx context.Context) error {
		h, err := m.worktreeHead(ctx, path)
		if err != nil || h == before {
			return err
		}
		if ref, err := m.resolveRef(ctx, branchRef); err == nil && ref == h {
			head, ok = h, true
		}
		return nil
	})
	return head, ok
}

// stoppedRebase is a rebase git stopped, since aborted: git's error, the
// conflicting files and, when they were asked for, both sides of each.
type stoppedRebase struct {
	err       error
	files     []string
	conflicts []ConflictFile
}

// rebaseIn rebases the branch checked out in the item's worktree at path
// (admin: its git directory) onto onto. A rebase git stops is aborted, after
// its conflicting files (and, with b, both sides of each) are read, and
// returned as a stoppedRebase; ctx ending stops git and puts the worktree
// back (runStoppable). No rebase is left in progress either way.
func (m *Manager) rebaseIn(ctx context.Context, id foreman.ItemID, path, admin, onto string, b *conflictBounds) (*stoppedRebase, error) {
	_, err := m.runStoppable(ctx, id, path, admin, "-c", "maintenance.auto=false", "rebase", "-q", "--no-verify", onto)
	if err == nil || ctx.Err() != nil {
		return nil, err
	}
	stop := &stoppedRebase{err: err}
	// From here the rebase is aborted whatever happens, ctx ending too.
	files, ferr := m.conflictedFiles(ctx, path)
	stop.files = files
	if ferr == nil && b != nil && len(files) > 0 {
		stop.conflicts = readConflicts(path, files, *b)
	}
	if aerr := m.settled(ctx, func(ctx context.Context) error { return m.abortOp(ctx, path, admin) }); aerr != nil {
		return nil, errors.Join(ferr, aerr)
	}
	if ferr != nil {
		return nil, ferr
	}
	return stop, nil
}

// conflictedFiles lists the files a stopped rebase or merge left unmerged
// in the worktree at path.
func (m *Manager) conflictedFiles(ctx context.Context, path string) ([]string, error) {
	out, err := m.git.Run(ctx, path, "--no-optional-locks", "diff", "--name-only", "-z", "--diff-filter=U")
	if err != nil {
		return nil, err
	}
	var files []string
	for f := range strings.SplitSeq(out, "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

// runStoppable runs git in the item's worktree at path (admin: its git
// directory) for a command that changes it, a rebase or a merge. When ctx
// ends while git runs, git is stopped and the worktree put back (putBack)
// before the error is returned.
func (m *Manager) runStoppable(ctx context.Context, id foreman.ItemID, path, admin string, args ...string) (string, error) {
	out, err := m.git.Run(ctx, path, args...)
	if err != nil && ctx.Err() != nil {
		if perr := m.settled(ctx, func(ctx context.Context) error { return m.putBack(ctx, id, path, admin) }); perr != nil {
			return out, errors.Join(err, perr)
		}
	}
	return out, err
}

// putBack undoes what a git stopped in the item's worktree may have left:
// the lock files of the worktree's index and HEAD and of the item's
// branch, and the operation it left in progress, aborted. git removes its
// lock files when it is stopped, but not always (a lock file made an
// instant before the signal stays). These are the stopped git's: none was
// there when it started (Merge and Rebase refuse a young lock file and
// remove a stale one first), the repository lock keeps other Managers out,
// and the worktree is the item's, which no one else works in while it is
// merged or rebased.
func (m *Manager) putBack(ctx context.Context, id foreman.ItemID, path, admin string) error {
	locks := []string{filepath.Join(admin, "index.lock"), filepath.Join(admin, "HEAD.lock"), filepath.Join(admin, "ORIG_HEAD.lock"),
		filepath.Join(m.commonDir, "refs", "heads", filepath.FromSlash(m.cfg.BranchPrefix), string(id)+".lock")}
	for _, l := range locks {
		err := os.Remove(l)
		if err == nil {
			m.log.Warn("merge: removed the lock file of a git stopped half way", "path", l)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("merge: %w", err)
		}
	}
	if op := inProgress(admin); op != "" {
		m.log.Warn("merge: aborting the operation a stopped git left in progress", "path", path, "op", op)
	}
	return m.abortOp(ctx, path, admin)
}

// abortOp aborts the operation in progress in the worktree at path (admin:
// its git directory), if there is one, and checks that it is gone.
func (m *Manager) abortOp(ctx context.Context, path, admin string) error {
	op := inProgress(admin)
	if op == "" {
		return nil
	}
	if _, err := m.git.Run(ctx, path, op, "--abort"); err != nil {
		if op != "rebase" || !rebaseUnstarted(admin) {
			return err
		}
		// git cannot abort a rebase whose state it had not finished
		// writing; it had not touched HEAD, the index or a file yet
		// (git writes that state first), so it is forgotten.
		m.log.Warn("merge: forgetting a rebase stopped before it started", "path", path, "abort", err)
		if _, qerr := m.git.Run(ctx, path, "rebase", "--quit"); qerr != nil {
			return errors.Join(err, qerr)
		}
	}
	if op := inProgress(admin); op != "" {
		return &InProgressError{Path: path, Operation: op}
	}
	return nil
}

// rebaseUnstarted says whether the rebase in progress in the worktree whose
// git directory is admin was stopped while git wrote its state, before
// which it changes nothing: a state directory of the merge backend without
// one of the files git writes first.
func rebaseUnstarted(admin string) bool {
	dir := filepath.Join(admin, "rebase-merge")
	if _, err := os.Stat(dir); err != nil {
		return false
	}
	for _, f := range []string{"head-name", "onto", "orig-head"} {
		if _, err := os.Stat(filepath.Join(dir, f)); errors.Is(err, fs.ErrNotExist) {
			return true
		}
	}
	return false
}

// settled runs fn, which puts a worktree back in order, on a context that
// does not end with ctx (a worktree is not left half way because its caller
// stopped waiting), bounded by StaleLockAge.
func (m *Manager) settled(ctx context.Context, fn func(context.Context) error) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.StaleLockAge)
	defer cancel()
	return fn(ctx)
}
