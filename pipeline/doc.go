// Package pipeline is the coordinator of seed 000: items move through the
// stages of a declarative Flow, worker messages pass sender and state guards,
// and every transition is a pure function whose effects a runtime carries out
// after it has persisted them.
//
// # Flows
//
// A Flow is data: stages, and per stage a table of Rules mapping each
// outcome a worker can report to an Action: Advance (next stage, fresh
// worker), Retry (same stage, fresh worker, up to a limit), Rework (back to an
// earlier stage, up to a cycle limit), Pause (escalate), MergeDone (squash
// merge, then DONE). A Rule may carry a BoardCheck (what the re-read board
// must show before the report is believed) and the texts of the stage result
// and the escalation. StoryFlow is seed 000 exactly: Stage 0 plan
// (COMPLETE needs tasks on the board; ERROR pauses), Stage 1 validate (GO
// needs status Todo and keeps the readiness score for later stages; NO-GO is
// retried once by story-{id}-s1-retry, then pauses), Stage 2 execute
// (COMPLETE needs To Review; ERROR pauses), Stage 3 quality gate (PASS,
// CONCERNS and WAIVED merge before DONE; FAIL reworks at Stage 2 by
// story-{id}-s2-fix{n} while fewer than 2 cycles, then pauses). Stage 1 and 3
// ERROR lines, which the seed's regex admits without a handler, pause too.
// Limits come from StoryConfig with the seed's defaults (validation retries
// 1, quality cycles 2, crash budget 1).
//
// # The core
//
// Flow.Step(state, event, now) returns the next State and the Effects to
// carry out, in order, without I/O or clock reads. The item's lifecycle
// (NEW, ACTIVE, MERGING, DONE, PAUSED) is one status × event table; an
// undefined pair, or a report whose outcome the stage's table lacks, is a
// *TransitionError and changes nothing. Every handler ACKs the report before
// it shuts the worker down, gives each stage a fresh worker named
// story-{id}-s{N} on a new AssignmentID, stamps stage start and end times,
// records each stage's result line, and removes the worktree when it pauses
// (except on a merge conflict, where the person resolving it needs it).
//
// Guards come first, as in the seed. Sender validation: a worker event
// whose worker name and assignment id are not the item's current ones is
// stale: ignored and counted (State.Stale). The state guard: a report for a
// stage the item is not in, from its current worker or from the one whose
// report moved it last, is a duplicate: counted (State.Duplicates) and
// re-ACKed to its sender, never reprocessed.
//
// A worker that goes idle without a report runs health's crash-detection
// protocol (health.Step): it is probed; a parseable status reply clears it;
// another idle or the probe timeout (reported by the host) confirms a crash,
// which within the crash budget spawns story-{id}-s{N}-retry with
// Effect.Resume set, and beyond it pauses. An unparseable message is probed
// once; a second one pauses.
//
// Effects are Ack, Shutdown, Spawn, Probe, CreateWorktree, RemoveWorktree,
// Merge, Escalate, UpdateBoard and AppendReport. Each has an idempotency key
// (Effect.Key): the assignment id for a spawn, the item for a merge (the
// merge commit's trailer), otherwise item, transition and position.
//
// # Services
//
// Board is the kanban board the checks re-read; FileBoard keeps it in one
// JSON file written atomically.
package pipeline
