package merge

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrNothingToMerge: the item's branch has no commits beyond its base, or
	// its changes are already all on the target.
	ErrNothingToMerge = errors.New("merge: nothing to merge")
	// ErrUncommittedChanges is matched by *DirtyError.
	ErrUncommittedChanges = errors.New("merge: uncommitted changes")
	// ErrNoBranch: the item has no branch (never created, or removed with its branch).
	ErrNoBranch = errors.New("merge: item has no branch")
	// ErrNoWorktree: the item has no worktree, or a broken one (Rebase).
	ErrNoWorktree = errors.New("merge: item has no worktree")
	// ErrLocked is matched by *LockedError.
	ErrLocked = errors.New("merge: a git lock file is held")
	// ErrUnknownBranch: Config.BaseBranch or TargetBranch does not exist
	// in the repository (New reports it, naming the branch).
	ErrUnknownBranch = errors.New("merge: branch does not exist")
	// ErrProtectedPath is matched by *ProtectedPathError.
	ErrProtectedPath = errors.New("merge: a change touches a protected directory")
	// ErrUnsafeDir is matched by *UnsafeDirError.
	ErrUnsafeDir = errors.New("merge: unsafe protected directory")
)

// ProtectedPathError is a merge refused because the item's change has
// entries at or under a protected directory (Config.Root, or one of
// Config.Protected), or a file or symbolic link where one of their parent
// directories is: landing it would make git delete or overwrite what the
// host keeps there (git treats ignored files as disposable). Nothing was
// changed: the target, its checkout and the item's worktree are as they
// were. Source says where the entries are: "branch" (a commit on the
// item's branch), "uncommitted" (what Request.CommitPending would have
// committed; it committed nothing) or "squash" (the squash onto the
// target: the target itself has them).
type ProtectedPathError struct {
	Item   foreman.ItemID
	Source string
	// Paths are the offending entries, relative to the repository,
	// slash-separated (at most 20).
	Paths []string
	// Protected are the protected directories, relative to the repository.
	Protected []string
}

func (e *ProtectedPathError) Error() string {
	where := map[string]string{"branch": "its branch adds", "uncommitted": "its uncommitted changes add",
		"squash": "the squash onto the target has"}[e.Source]
	if where == "" {
		where = "its change has"
	}
	nothing := "nothing was merged"
	if e.Source == "uncommitted" {
		nothing = "nothing was committed or merged"
	}
	return fmt.Sprintf("merge: refused to merge %s: %s %s, where protected directories are (%s): checking it out would make git delete or overwrite what is kept there; %s",
		e.Item, where, strings.Join(e.Paths, ", "), strings.Join(e.Protected, ", "), nothing)
}

// Is makes a ProtectedPathError match ErrProtectedPath.
func (e *ProtectedPathError) Is(target error) bool { return target == ErrProtectedPath }

// UnsafeDirError is New's refusal of a protected directory (Config.Root or
// one of Config.Protected) that a commit or the host could not keep safe:
// a symbolic link, or one on the way to it inside the working tree (the
// host would write wherever it points, and git may replace it), something
// other than a directory at its path, or a directory that git tracks.
type UnsafeDirError struct {
	// Dir is the directory, absolute.
	Dir    string
	Reason string
	// Paths are the tracked files, when they are the reason.
	Paths []string
}

func (e *UnsafeDirError) Error() string {
	s := fmt.Sprintf("merge: protected directory %s %s", e.Dir, e.Reason)
	if len(e.Paths) > 0 {
		s += ": " + strings.Join(e.Paths, ", ")
	}
	return s
}

// Is makes an UnsafeDirError match ErrUnsafeDir.
func (e *UnsafeDirError) Is(target error) bool { return target == ErrUnsafeDir }

// ConflictError is a merge or rebase that could not be done without a
// person: nothing was changed (the target, its checkout and the item's
// worktree are exactly as they were). Stage says which step conflicted:
// "squash" (the item against the target), "sync" (bringing the item's
// branch up to date) or "rebase" (Rebase).
type ConflictError struct {
	Item   foreman.ItemID
	Target string
	Stage  string
	Files  []string
	// Conflicts are both sides of each conflict, for Stage "rebase": the
	// first files of Files, within Rebase's bounds.
	Conflicts []ConflictFile
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("merge: %s conflicts with %s (%s) in %d file(s): %s",
		e.Item, e.Target, e.Stage, len(e.Files), strings.Join(e.Files, ", "))
}

// RebaseError is a rebase of an item's branch that git stopped with no
// conflicting file (Err, git's error, says why), or that could not start
// because the item's worktree does not have its branch checked out. The
// rebase was aborted: the branch and the worktree are as they were.
type RebaseError struct {
	Item   foreman.ItemID
	Target string
	Reason string
	Err    error
}

func (e *RebaseError) Error() string {
	s := fmt.Sprintf("merge: rebasing %s onto %s: %s", e.Item, e.Target, e.Reason)
	if e.Err != nil {
		s += ": " + e.Err.Error()
	}
	return s
}

func (e *RebaseError) Unwrap() error { return e.Err }

// DirtyError reports uncommitted changes where a merge needs a clean tree:
// the item's worktree (Target false), or a checkout of the target branch whose
// local changes, or untracked or ignored files, the merge would overwrite or
// remove (Target true). Nothing was changed.
type DirtyError struct {
	Path   string
	Target bool
	Files  []string
}

func (e *DirtyError) Error() string {
	what := "item worktree"
	if e.Target {
		what = "checkout of the target branch"
	}
	return fmt.Sprintf("merge: %s %s has uncommitted changes: %s", what, e.Path, strings.Join(e.Files, ", "))
}

// Is makes a DirtyError match ErrUncommittedChanges.
func (e *DirtyError) Is(target error) bool { return target == ErrUncommittedChanges }

// InProgressError is a checkout that is in the middle of a git operation
// Foreman did not start (a merge, rebase, cherry-pick or revert by someone
// else in a checkout of the target). Foreman does not abort other people's
// work; a person should finish or abort it.
type InProgressError struct {
	Path      string
	Operation string
}

func (e *InProgressError) Error() string {
	return fmt.Sprintf("merge: %s has a %s in progress; finish or abort it", e.Path, e.Operation)
}

// LockedError is a git lock file that is too young to be a crash leftover:
// another git process may be working. Retry later; a lock older than
// Config.StaleLockAge is removed automatically.
type LockedError struct{ Path string }

func (e *LockedError) Error() string {
	return fmt.Sprintf("merge: %s exists: another git process may be running", e.Path)
}

// Is makes a LockedError match ErrLocked.
func (e *LockedError) Is(target error) bool { return target == ErrLocked }

// CheckError is a post-merge check that failed on the merged tree. The target
// was not moved.
type CheckError struct {
	Item     foreman.ItemID
	Command  []string
	ExitCode int
	// Output is the tail of the check's output (at most 64 KiB).
	Output string
	// Refused is what Config.CheckSandbox refused of the check's, one
	// line each: such a check fails whatever its exit status.
	Refused []string
	// TimedOut: the check ran past Config.CheckTimeout and was killed.
	TimedOut bool
	Err      error
}

func (e *CheckError) Error() string {
	if len(e.Refused) > 0 {
		return fmt.Sprintf("merge: post-merge check %q for %s reached beyond its checkout (exit %d), refused by its sandbox: %s",
			strings.Join(e.Command, " "), e.Item, e.ExitCode, strings.Join(e.Refused, "; "))
	}
	if e.TimedOut {
		return fmt.Sprintf("merge: post-merge check %q for %s %v: %s", strings.Join(e.Command, " "), e.Item, e.Err, tail(e.Output, 400))
	}
	detail := tail(e.Output, 400)
	if strings.TrimSpace(detail) == "" && e.Err != nil {
		detail = e.Err.Error() // it did not run, or said nothing
	}
	return fmt.Sprintf("merge: post-merge check %q for %s failed (exit %d): %s",
		strings.Join(e.Command, " "), e.Item, e.ExitCode, detail)
}

func (e *CheckError) Unwrap() error { return e.Err }

// PushError is a push that failed or did not move the remote ref. The local
// merge stands (Result is valid); a retried Merge pushes again.
type PushError struct {
	Remote string
	Ref    string
	Want   string // the commit the remote should have
	Got    string // what the remote has ("" if unknown or absent)
	Err    error
}

func (e *PushError) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("merge: push %s to %s: %v", e.Ref, e.Remote, e.Err)
	}
	return fmt.Sprintf("merge: push %s to %s: remote has %q, want %s", e.Ref, e.Remote, e.Got, e.Want)
}

func (e *PushError) Unwrap() error { return e.Err }

// VerifyError is a merge whose result could not be confirmed: the target did
// not advance to the squash commit or its tip lacks the item's trailer. It
// means something else wrote to the repository at the same time.
type VerifyError struct {
	Target string
	Want   string
	Got    string
	Reason string
}

func (e *VerifyError) Error() string {
	return fmt.Sprintf("merge: verify %s: %s (want %s, got %s)", e.Target, e.Reason, e.Want, e.Got)
}

func tail(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
