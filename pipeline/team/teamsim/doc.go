// Package teamsim simulates a whole team (pipeline/team) deterministically:
// thousands of schedules of stories, agents, crashes and conflicts per
// minute, each decided by one seed and replayable exactly.
//
// A simulation runs the code the team's Run runs — the team's own
// coordinator (pipeline/team/internal/teamcore: what a graph spawn, a
// report, a story's end, a person's decision and a restart mean), its
// conflict triage and its board, over the story flow's pipeline.Runtime
// (persist, then act; Recover after a restart), the task graph's
// taskgraph.Runtime and the worker pool's worker.Dispatcher with its
// assignment-id fence — carrying out the coordinator's effects (wake-ups,
// parking, reworks) as events in an order Config.Seed picks, as the
// team's goroutines may deliver them — and replaces the world around them
// with seeded models, stepped one event at a time on a fake clock:
//
//   - simulated agents that succeed, fail quality gates, hang, crash, go
//     silent, report twice, report again after they were replaced, print
//     garbage, report about another story, overspend, or hit a rate limit
//     (Config.Agent plugs in a model of a host's own agents);
//   - a repository in memory: a worktree per story, squash merges with the
//     story's trailer on main, merges and rebases that conflict, gates on a
//     rebased change that fail;
//   - a person who retries, resumes, skips or abandons paused stories,
//     within seconds or up to an hour later (a decision after the Run
//     ended is carried out by the host running the team again);
//   - a store that keeps versioned records across coordinator crashes, and
//     at a crash loses the write that was under way;
//   - messages that are delayed, duplicated and reordered;
//   - coordinator crashes at any store write, spawn, message or merge,
//     after which a new coordinator recovers from the store as the team's
//     Run does.
//
// After every step the invariants are checked (the Inv* constants): a DONE
// story has exactly one merge commit with its trailer; every story ends
// DONE or PAUSED with an escalation (or is still legitimately running); no
// assignment is spawned twice; no worker is Busy without an item; a stale
// or duplicate message never changes state; the budget is never exceeded
// by more than the documented overshoot; a paused story's dependents never
// start; a person's retry or resume is carried out. Result.Violations
// lists the broken ones, and Result.Err says how to replay that seed
// (ReplayCommand). The same Config and Seed always give the same trace
// (Result.TraceHash).
//
// The package's own test runs hundreds of seeds with go test, and 10,000
// in CI (FOREMAN_SIM_SEEDS); docs/simulation.md describes the long run and
// the deliberate bugs the invariants were shown to catch.
package teamsim
