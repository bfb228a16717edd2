// Package merge gives every item of work its own git worktree and lands
// finished items on the target branch through one serialized, verified
// squash merge.
//
// # Worktrees
//
// Manager.Create makes <Root>/<id> (default Root: .worktrees in the main
// worktree, always absolute) on branch <prefix>/<id> (default prefix
// "foreman") from the base branch (default "main"), and records the commit it
// started from. It is idempotent: a healthy worktree is returned as is, and a
// stale one (directory deleted by hand, registration lost, a crash in the
// middle of `git worktree add`) is cleared and made again, keeping the
// branch and its commits. Remove tolerates a missing worktree and deletes the
// branch only with Config.DeleteBranchOnRemove (never one checked out
// elsewhere); uncommitted changes in a removed worktree are discarded, as
// with `git worktree remove --force`. List reads git's worktree registry
// directly; Prune removes the worktrees its keep function rejects. Item ids
// are validated (foreman.ItemID) before any path or git argument is built
// from them. DiffStat measures an item's branch for reports.
//
// # Locking
//
// `git worktree add` run in parallel on one repository fails now and then,
// and merges must not interleave, so every operation that changes the
// repository holds a per-repository lock: a flock(2) on
// <git-common-dir>/foreman.lock, taken through a fresh file description each
// time, so that it excludes other processes and other Managers of the same
// process alike, behind a per-Manager channel mutex so that one Manager's
// goroutines queue in Go. There is no package-level state: a host that wants
// a single in-process queue per repository shares one Manager. git commands
// a host runs itself, outside this lock, can still meet git's own race (for
// example `git worktree list` failing while an add is under way).
//
// # Merging
//
// Manager.Merge lands an item as one commit "{id}: {title}" with the trailer
// "Foreman-Item: {id}":
//
//   - preconditions: a clean worktree (or Request.CommitPending), and
//     commits beyond the base (else ErrNothingToMerge);
//   - idempotent: a commit on the target with the item's trailer means the
//     item landed before; the result is AlreadyMerged and nothing lands twice;
//   - optional Request.Sync: rebase the branch onto the target, falling back
//     to a merge;
//   - the squash is computed with `git merge-tree --write-tree` and written
//     with `commit-tree`, touching no working tree, so a conflict changes
//     nothing anywhere and is returned as *ConflictError with the files;
//   - optional Request.Check: a command run in a temporary checkout of the
//     squash commit (contained by Config.CheckSandbox when set, bounded by
//     Config.CheckTimeout); on failure, a timeout or anything its sandbox
//     refused (*CheckError) the target never moved;
//   - the target moves by compare-and-swap update-ref when it is not checked
//     out, or by `merge --ff-only` inside the worktree that has it checked out
//     (main or linked), so that checkout follows; git refuses, and Merge
//     returns *DirtyError, rather than overwrite local changes there
//     (Config.RequireCleanTarget refuses on any local change);
//   - the target is read back: it must be the squash commit, on the old tip,
//     carrying the trailer (else *VerifyError);
//   - optional Request.Push, verified with ls-remote (*PushError).
//
// One item lands once: after it has landed, a later Merge of the same id
// returns AlreadyMerged even if its branch has gained commits since. Merges
// of one repository are queued on the repository lock (first come, first
// served within a Manager), so concurrent calls are safe.
//
// # Rebasing
//
// Manager.Rebase rebases an item's branch onto the target in its worktree,
// under the repository lock, and gives what a host needs to hand a conflict
// to the item's agent or to a person: *ConflictError with Stage "rebase",
// whose Conflicts hold, per file, the regions git marked with both sides
// (the target's and the item's, and the common ancestor's where git wrote
// it), bounded by RebaseOptions. A rebase that stops is always aborted, so
// the branch and the worktree are left as they were; *RebaseError is one
// git stopped without a conflicting file, *DirtyError a worktree with
// uncommitted changes (not touched). Request.Sync's rebase is the same
// code. A rebase or sync stopped by its context half way is put back at
// once: git gets SIGTERM, and what it may leave behind (a lock file made
// an instant before the signal, which git does not remove, and the rebase
// in progress) is removed and aborted before the context's error returns,
// so that the next operation on the worktree meets neither.
//
// Manager.Exclude keeps a directory of the host's inside the working tree
// out of `git status` through the repository's info/exclude, as Create
// does for the worktree root.
//
// # Protected directories
//
// A host that keeps its own state in the repository's working tree (a
// team's database in .foreman, the item worktrees in .worktrees) keeps it
// git-ignored, and git treats ignored files as disposable: checking out a
// commit with a file named .foreman deletes the directory .foreman and
// everything in it, and a commit with files inside it overwrites them. So
// the worktree Root and every directory in Config.Protected are protected:
// Merge refuses, with *ProtectedPathError naming the paths, an item whose
// branch or squash has anything at or under one of them, or a file or
// symbolic link where one of their parent directories is (names compared
// ignoring case), and Request.CommitPending commits nothing when the
// uncommitted changes would add such a path. The item's agent cannot get
// such a commit onto the target; it may keep it on its own branch, in its
// own worktree, where it harms nothing. The fast-forward of a checkout of
// the target runs with git's --no-overwrite-ignore, so git refuses
// (*DirtyError) rather than delete or overwrite any ignored file there.
// New refuses, with *UnsafeDirError, a protected directory that is a
// symbolic link or is reached through one inside the working tree (the
// host would write wherever it points), that is a file, or that git
// tracks. Merge also refuses, with *LinkOutsideError, a squash that adds
// or changes a symbolic link pointing outside the repository (absolute,
// or climbing above its root): whatever reads it (a gate, a person,
// another item's agent) would read what it points at.
//
// Outcomes a host acts on are returned as distinct errors, so that it can
// tell them apart with errors.Is and errors.As: ErrNothingToMerge, *ConflictError (pause the item and escalate with
// its Files), *DirtyError, *CheckError, *ProtectedPathError, *LinkOutsideError, *PushError
// (the returned Result is valid: the local merge stands and a retry pushes
// again), *LockedError, *InProgressError, *VerifyError, and from Rebase
// *RebaseError and ErrNoWorktree. Any other error is a system fault.
//
// New first waits for the git commands that a process now gone (a host
// SIGKILLed in the middle of `git worktree add` or a merge) left running in
// the repository or its worktrees: git runs in a process group of its own,
// so it outlives its host, and it would race with the repairs below and
// with an agent's next commit there. Such a git is let finish (ended half
// way, it would leave its work half done), for up to Config.StaleLockAge;
// one still running then gets SIGTERM, on which git removes its lock files,
// and 5 s later SIGKILL. Config.Logger hears of each. Gits are told apart
// by the FOREMAN_GIT_OWNER variable that every git Foreman starts carries:
// the pid and start time of the process that started it. Only such gits
// are waited for or signalled, never those of a living process, and never
// a whole process group.
//
// Before it acts, Merge repairs crash leftovers: an interrupted merge or
// rebase in the item's worktree is aborted, a half-made worktree is cleared
// (the branch is merged without it),
// git lock files older than Config.StaleLockAge are removed (younger ones are
// *LockedError), and an operation in progress in a checkout of the target is
// reported as *InProgressError rather than touched.
//
// To keep a cycle close to the cost of the raw git commands
// (BenchmarkItemCycle compares the two in one run): reads that git would
// answer from a few files (the repository's layout, refs, HEADs of
// worktrees, the commit Merge just wrote, the target's history since the
// item's base when it is a chain of loose commits, the worktree registry,
// the branch-name rules) are done directly, falling back to git when
// the layout is not the simple one; the three independent questions a merge
// starts with (clean worktree, landed before, clean squash) are asked of git
// in parallel; worktrees are removed without a git process; and git's auto
// maintenance runs every 32 merges rather than after each command.
package merge
