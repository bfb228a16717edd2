// Package teampg spreads a team over several processes and machines on
// PostgreSQL: coordinator processes (one leads at a time, fenced by its
// lease term, see pipeline/pgstore) and worker host processes that perform
// the stories' stages in their own clones of a shared git repository.
//
// The leader runs the team (pipeline/team) as a single process would, with
// three seams set: Config.Store is the leader's fenced store, Config.Remote
// is a Remote (each stage becomes an assignment in the worker/pgtransport
// queue; the host's heartbeats keep it alive, its DONE brings back the
// stage's report line), and Config.Worktrees and Config.Merger go through
// merge/gitremote (no local worktrees; the merge squashes what the hosts
// pushed and lands it on the shared repository by compare-and-swap).
//
// A worker host (NewHost) claims assignments, checks the story's worktree
// out of the shared repository, performs the stage with the team's own
// stage agent (team.NewStageAgent), pushes the story's branch and records
// the stage's result in the team's store, then reports DONE.
//
// What a paused or partitioned old leader can do once another has taken
// over: its store writes and transport writes fail (pgstore.ErrFenced),
// so it spawns nothing and records nothing; a merge it had already
// decided is re-checked against the lease just before the push (Merger)
// and, should it still slip through, lands nothing twice (the trailer and
// the push's compare-and-swap).
package teampg
