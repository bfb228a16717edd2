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
// The layers, each usable alone, dependencies pointing down:
//
//	pipeline   items moving through stages; guarded, idempotent message handling
//	worker     the Dispatcher: fenced assignment, heartbeats, progress timeouts, escalation
//	phases     one run's build → snapshot → verify → feedback loop and its services
//	health     liveness, progress and crash detection; checkpoints and resume
//	merge      a git worktree per item; one serialized, verified squash merge
//
// Where to start: a single agent with verification gates is package phases
// (see its RunLoop and examples/phaseloop). docs/architecture.md describes
// the whole design and its invariants.
package foreman
