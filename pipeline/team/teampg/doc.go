// Package teampg spreads a team over several processes and machines on
// PostgreSQL: coordinator processes (one leads at a time, fenced by its
// lease term, see pipeline/pgstore) and worker host processes that perform
// the stories' stages in their own clones of a shared git repository.
//
// A coordinator calls Lead: it campaigns for the lease, fences the shared
// repository with the lease's term, and returns a Leadership whose
// Configure sets the team.Config seams: Store is the leader's fenced store,
// Remote is a Remote (each stage becomes an assignment in the
// worker/pgtransport queue; the host's heartbeats keep it alive, its DONE
// brings back the stage's report line), and Worktrees and Merger are a Git
// over merge/gitremote (no local worktrees; the merge squashes what the
// hosts pushed and lands it on the shared repository by compare-and-swap).
// Run the team with the Leadership's Context, which ends when the lead is
// lost.
//
// A worker host (NewHost) claims assignments, checks the story's worktree
// out of the shared repository, performs the stage with the team's own
// stage agent (team.NewStageAgent), pushes the story's branch and records
// the stage's result in the team's store, then reports DONE.
//
// Worker hosts run agents, so they should log in with a database role of
// their own: GrantWorker (or LeadConfig.WorkerRoles) gives a role what a
// host needs and nothing more, and a host's stage agent reads and writes
// the team's store through a WorkerStore, which reaches only the stage
// records (board, memory, refusals, build bases, stage results) of the
// stories its role has claimed, and the team's secret. Such a role cannot
// touch the stories, decisions, the pipeline's records, events, the
// leader's lease or another role's claims, nor create anything: every
// attempt is refused with SQLSTATE 42501 (docs/multihost.md, "Database
// roles").
//
// Example_coordinator and Example_worker (in example_test.go, shown on
// pkg.go.dev) wire each side in about 30 lines; examples/foreman runs both
// roles from one binary. The coordinator needs no agent program and no gate
// plan (team.Config.Agent and Gates are the hosts'); each host's
// pgtransport schema is its store's. A schema holds one team: the store
// remembers the repository it was first used with, and team.New refuses
// another (team.ErrOtherRepository).
//
// What a paused or partitioned old leader can do once another has taken
// over: nothing. Its store and transport writes fail (pgstore.ErrFenced),
// so it spawns nothing and records nothing. A merge it had already decided
// is re-checked against the lease just before the squash (Git); and if it
// was paused after that check, its push is refused by the shared
// repository itself, which the new leader fenced with its newer term
// before it did anything (gitremote.Clone.Fence): *gitremote.FencedError,
// nothing lands.
package teampg
