// Package teamsim simulates a whole team (pipeline/team) deterministically:
// thousands of schedules of stories, agents, crashes and conflicts per
// minute, each decided by one seed and replayable exactly.
//
// A simulation composes the same layers as the team's Run — the story
// flow's pipeline.Runtime (persist, then act; Recover after a restart),
// the task graph's taskgraph.Runtime, the worker pool's worker.Dispatcher
// with its assignment-id fence, and the team's own decisions (what a
// graph spawn means for a story, what a story's end means to the graph,
// what a verified report puts on the board) — and replaces the world
// around them with seeded models, stepped one event at a time on a fake
// clock:
//
//   - simulated agents that succeed, fail quality gates, hang, crash, go
//     silent, report twice, report again after they were replaced, print
//     garbage, report about another story, overspend, or hit a rate limit
//     (Config.Agent plugs in a model of a host's own agents);
//   - a repository in memory: a worktree per story, squash merges with the
//     story's trailer on main, merges that conflict;
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
// start. Result.Violations lists the broken ones, and Result.Err says how
// to replay that seed (ReplayCommand). The same Config and Seed always give
// the same trace (Result.TraceHash).
//
// The package's own test runs hundreds of seeds with go test, and 10,000
// in CI (FOREMAN_SIM_SEEDS); docs/simulation.md describes the long run and
// the deliberate bugs the invariants were shown to catch.
package teamsim
