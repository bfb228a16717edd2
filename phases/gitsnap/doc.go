// Package gitsnap is the default phases.Snapshotter: it records what an agent
// changed in a git workspace.
//
// Before notes HEAD (or, in a repository with no commits yet, the empty tree)
// and the files already dirty. Capture then reports, relative to that base:
// the commits made since, a per-file diff of the whole change (committed,
// staged, unstaged and untracked files alike; ignored files are not counted),
// the paths still uncommitted, and a DiffHash that identifies the content of
// the change, so that a run loop can tell when an agent produces the same
// diff again. The hash covers each changed path's modes and blob ids before
// and after, so committing a change does not alter its DiffHash, and every
// empty change has the same one.
//
// A workspace may already be dirty when the run begins (the user's own
// edits, staged or not, and untracked files). Before then also stores the
// working tree's content as a tree object (BeforeState.BaseTree), and
// Capture diffs against that tree instead of HEAD: an agent that does
// nothing leaves an empty snapshot, and the user's edits are neither in
// Files nor in DiffHash. Commits are still those made since HEAD at the
// start. Uncommitted then lists only the dirty paths whose content changed
// since the start. From a clean start BaseTree is empty and the diff is
// taken from the base commit.
//
// Capture never touches the user's index or working tree: untracked files
// are counted by staging everything into a temporary copy of the index
// (GIT_INDEX_FILE), written beside the real index in the git directory and
// deleted afterwards (Before does the same to write BaseTree). The copy
// keeps the index's modification time, so that git still re-reads a file
// changed in the second its index was last written rather than trusting the
// cached size and times, as git itself does. That staging
// does write blob and tree objects into the repository's object store,
// where unreferenced ones are garbage-collected by git as usual (after two
// weeks by default, gc.pruneExpire; a BeforeState kept longer than that may
// name a tree git has pruned). A working tree with no change in it needs no
// staging: Capture then diffs HEAD's tree against the base, and lists the
// commits since the base from the loose commit objects when they form a
// plain chain (else with git log).
//
// An empty change is reported as such (Snapshot.Empty); whether that is a
// failure is the caller's decision. Errors are system faults only: a
// workspace that is not a git repository (*NotRepositoryError), git failing,
// or the context ending.
package gitsnap
