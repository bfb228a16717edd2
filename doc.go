// Package foreman is an embeddable library that runs teams of AI coding
// agents the way a good foreman runs a crew: it hands out work, watches that
// each worker is alive and making progress, checks the work against gates,
// sends it back with feedback, escalates what is stuck, and lands finished
// work on main exactly once.
//
// This root package holds only the shared vocabulary: the identifier types
// (ItemID, AssignmentID, WorkerID) with their validation, and the Clock that
// every timeout is measured on. It imports no other Foreman package, so every
// layer can depend on it.
//
// Where to start: package pipeline/team, the team, composes every layer into
// one type: stories scheduled by their dependencies, each moved through
// plan, validation, build and quality gate by agents (any agent CLI through
// phases/agentcmd: Claude Code, Codex and Gemini CLI with their permission
// profiles, each in an OS sandbox where one works), checked against your
// gates and squash-merged onto main exactly once, durable across crashes.
// examples/quickstart runs it on a throwaway repository in a few seconds;
// examples/foreman is the command-line host. modeltest runs the real agent
// CLIs offline against a scripted model, for testing a host's setup.
//
// The layers under it, each usable alone, dependencies pointing down:
//
//	pipeline   items moving through stages; guarded, idempotent message handling
//	worker     the Dispatcher: fenced assignment, heartbeats, progress timeouts, escalation
//	phases     one run's build → snapshot → verify → feedback loop and its services
//	health     liveness, progress and crash detection; checkpoints and resume
//	merge      a git worktree per item; one serialized, verified squash merge
//
// A single agent with verification gates, without a team, is package phases
// (its RunLoop; examples/phaseloop). docs/architecture.md describes the
// whole design and its invariants.
package foreman
