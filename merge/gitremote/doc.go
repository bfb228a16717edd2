// Package gitremote carries git work between hosts through one shared
// repository (a remote every host can fetch from and push to), for teams
// whose workers and coordinators run on several machines.
//
// Each host has its own clone (Open clones the remote the first time). A
// worker host calls Checkout before an item's stage: the clone's base
// branch is set to the remote's and the item's worktree starts from the
// item's branch as the remote has it (what earlier stages pushed, from any
// host), or from the base when the remote has none. After the stage, Push
// commits what the agent left uncommitted and pushes the item's branch,
// on condition that the remote's branch is still where Checkout found it:
// a stale attempt never overwrites a newer one (*BranchMovedError).
//
// The leader's merger calls Merge: it fetches the remote's target and the
// item's branch, squash-merges with the "Foreman-Item: <id>" trailer and
// verifies, exactly as merge.Manager does in one repository, then pushes
// the target with compare-and-swap (git push
// --force-with-lease=<target>:<the tip it squashed onto>). Two mergers, in
// any processes on any hosts, can therefore never both land an item: the
// loser fetches again, finds the trailer on the new tip and reports
// AlreadyMerged, or squashes onto the new tip and pushes again, up to
// Config.MaxAttempts; then *RaceError (nothing of it is on the remote, and
// a later Merge is safe). A merger that dies between its local squash and
// the push leaves nothing behind: every Merge starts by resetting the
// clone's target to the remote's.
//
// Mergers that take turns by an election elsewhere (a lease in a
// database) fence the shared repository with their term (Clone.Fence):
// every Merge then pushes the target together with the fence, atomically,
// so a leader that was paused while a newer one took over cannot land
// anything once it resumes (*FencedError).
//
// The clone's own checkout is detached, so its base and target branches
// can follow the remote without touching any working tree; item worktrees
// live under the clone's .worktrees as merge.Manager makes them.
package gitremote
