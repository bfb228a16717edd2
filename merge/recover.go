package merge

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// A crash (of Foreman, of git, of the machine) can leave a repository half
// way through an operation. Before it acts, a merge looks for the leftovers
// it may meet and either repairs them or names them in a typed error.

// inProgressMarker is a file git keeps while an operation waits for a person.
type inProgressMarker struct{ file, op string }

// inProgressMarkers returns the markers by value, so that no caller can change
// them for another.
func inProgressMarkers() [5]inProgressMarker {
	return [...]inProgressMarker{
		{"MERGE_HEAD", "merge"},
		{"rebase-merge", "rebase"},
		{"rebase-apply", "rebase"},
		{"CHERRY_PICK_HEAD", "cherry-pick"},
		{"REVERT_HEAD", "revert"},
	}
}

func inProgress(gitDir string) string {
	for _, mk := range inProgressMarkers() {
		if _, err := os.Lstat(filepath.Join(gitDir, mk.file)); err == nil {
			return mk.op
		}
	}
	return ""
}

// clearLockFile removes a git lock file old enough to be a crash leftover and
// reports a younger one as *LockedError.
func (m *Manager) clearLockFile(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("merge: %w", err)
	}
	if age := m.clk.Now().Sub(fi.ModTime()); age < m.cfg.StaleLockAge {
		return &LockedError{Path: path}
	}
	m.log.Warn("merge: removing stale git lock file", "path", path, "modified", fi.ModTime())
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("merge: remove stale lock: %w", err)
	}
	return nil
}

// recoverItemWorktree brings an item's worktree back to a state a merge can
// start from. Merge is called when the item's worker has finished, so an
// operation still in progress there is a crash leftover (typically Merge's own
// sync step interrupted): it is aborted, which restores the branch and tree.
func (m *Manager) recoverItemWorktree(ctx context.Context, path, admin string) error {
	if err := m.clearLockFile(filepath.Join(admin, "index.lock")); err != nil {
		return err
	}
	if op := inProgress(admin); op != "" {
		m.log.Warn("merge: aborting leftover operation in item worktree", "path", path, "op", op)
	}
	return m.abortOp(ctx, path, admin)
}

// checkTargetCheckout refuses to touch a checkout of the target that someone
// is working in: an operation in progress is theirs to finish.
func (m *Manager) checkTargetCheckout(co checkout) error {
	if op := inProgress(co.GitDir); op != "" {
		return &InProgressError{Path: co.Path, Operation: op}
	}
	return m.clearLockFile(filepath.Join(co.GitDir, "index.lock"))
}
