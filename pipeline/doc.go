// Package pipeline is the story-flow coordinator: items move through the
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
// and the escalation. StoryFlow is the story flow: Stage 0 plan
// (COMPLETE needs tasks on the board; ERROR pauses), Stage 1 validate (GO
// needs status Todo and keeps the readiness score for later stages; NO-GO is
// retried once by story-{id}-s1-retry, then pauses), Stage 2 execute
// (COMPLETE needs To Review; ERROR pauses), Stage 3 quality gate (PASS,
// CONCERNS and WAIVED merge before DONE; FAIL reworks at Stage 2 by
// story-{id}-s2-fix{n} while fewer than 2 cycles, then pauses). Stage 1 and 3
// ERROR lines, which the message protocol admits without a handler of their
// own, pause too. Limits come from StoryConfig with the story flow's
// defaults (validation retries 1, quality cycles 2, crash budget 1).
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
// Flow.AppendStep is Step appending the effects to a slice the caller
// owns, as strconv.AppendInt does: a host that reuses one buffer allocates
// nothing for effects, and the Runtime appends them to the item's pending
// effects.
//
// Guards come first, before any handler. Sender validation: a worker event
// whose worker name and assignment id are not the item's current ones (an
// event without an assignment id included, since names are reused) is
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
// once; a second one pauses, and a probe of it that times out unanswered
// (the worker may have ended on the garbage) hands the item to the crash
// protocol as an idle worker would.
//
// Effects are Ack, Shutdown, Spawn, Probe, CreateWorktree, RemoveWorktree,
// Merge, Escalate, UpdateBoard and AppendReport. Each has an idempotency key
// (Effect.Key): the assignment id for a spawn, the item for a merge (the
// merge commit's trailer), otherwise item, transition and position.
//
// # The runtime
//
// Runtime is the imperative shell. For each event (Start, Deliver of a
// message.Envelope, or Handle of any Event) it loads the item's record from
// a store.Store, re-reads the board when the report's rule has a check,
// steps, and writes the new state together with its effects in one Apply
// (with the record's version: optimistic concurrency). Only then does it
// carry the effects out, one by one. The effects done are recorded by the
// item's next write rather than by a write each: the next transition's, the
// write of a merge's result (stepped when the merge returns, and persisted
// before its own effects run), or a last write once the item is DONE or
// PAUSED. An effect that fails stays pending (what was done before it is
// recorded) and the error is returned; Recover (a restart) or the item's
// next event re-issues it. A restart also re-issues the effects of each
// active item's last transition (an ACK, a shutdown, the spawn of its
// current worker), which is what makes the spawn's idempotency matter. Effects are idempotent:
// a spawn is keyed by its assignment id, merge.Manager recognises its own
// trailer, removing a missing worktree succeeds, a second ACK is harmless,
// and FileReporter keys each section. TestCrashAtEveryEffectBoundary stops
// the runtime before and after each of the 23 effects of a full story (a
// quality-gate rework included) with a real merge.Manager and git
// repository, restarts it from the store, and checks the end state and that
// main carries exactly one squash commit with the item's trailer.
//
// A flow has any number of stages up to message.MaxStage+1 (1000); the
// story flow's four have report lines of their own, every stage reports
// with message.Report. Messages come in through EventOf, which maps
// pipeline/message's typed messages to Events (every stage report one way,
// through message.ReportOf). A stage runner in the coordinator's process
// hands its report over typed (a ReportingAgent: AgentSpawner and
// DispatcherSpawner take it as it is), so nothing is formatted there to be
// parsed back; an agent's printed line is parsed once, when the spawner
// reads it. An envelope whose body did not parse becomes
// EventUnparseable (probe, then pause), and a canonical line the stage has
// no rule for is treated the same way by Deliver. A record that does not
// decode, or is from a newer format, is ErrCorruptRecord and is left as it is.
// The runtime has no timers: idleness and probe timeouts (EventIdle,
// EventProbeTimeout) are reported by the spawner (DispatcherSpawner does,
// from the worker.Dispatcher's supervision and a probe timer) or the host.
//
// # Services
//
// The runtime acts through small interfaces: Spawner, Messenger, Worktrees
// and Merger (Git adapts a merge.Manager, mapping its typed refusals to a
// MergeOutcome: a conflict pauses naming the files, nothing to merge or a
// dirty worktree pauses for a person, a lost push keeps the landed merge;
// a Lander, such as pipeline/team/ghland's pull requests, answers
// MergeOutcome.Landing at once and reports the end later through Handle,
// a check's or a review's feedback as EventLandRejected),
// Board (FileBoard: one JSON file written atomically with
// internal/atomicfile), Escalator, and Reporter (FileReporter: a section per
// item appended to <root>/docs/tasks/reports/pipeline-{date}.md with stage
// results, start times, durations, counters, diff stats and problems).
// Two spawners run agents (phases.AgentDriver; agentcmd runs any agent
// CLI) in the item's worktree and are the Runtime's Messenger too. Both end
// the prompt with the assignment block (Foreman-Item, Foreman-Stage,
// Foreman-Worker, Foreman-Assignment lines; AssignmentBlock,
// ParseAssignment) and put the same values in the request's Env
// (FOREMAN_ITEM, FOREMAN_STAGE, FOREMAN_WORKER, FOREMAN_ASSIGNMENT;
// AssignmentEnv), bound each execution by StageTimeouts, deliver the last
// canonical line of the agent's final message (else of its plain-text
// output) as a message.Envelope with the worker and assignment, and report
// an agent that ended without one as idle, so the crash protocol probes it
// and resumes it (from its checkpoint's session or with the CHECKPOINT
// RESUME block). AgentSpawner runs each assignment in a goroutine of its
// own and answers probes from whether it still runs. DispatcherSpawner
// submits each assignment to a worker.Dispatcher it owns (fresh mode), as
// an item whose id is the coordinator's AssignmentID, so stages get its
// liveness and progress supervision while fencing stays the coordinator's:
// an assignment the Dispatcher parks (failed, silent, stalled) is idle, a
// probe is answered while the Dispatcher still holds the assignment, and
// otherwise times out (EventProbeTimeout) after ProbeTimeout.
// Package pipelinemock holds gomock mocks of the interfaces.
//
// # Limits of what is built
//
// The Dispatcher's own crash and stall retries are off under
// DispatcherSpawner (the coordinator's crash protocol decides), and its
// reports are read from the in-process agent, so a remote worker.Transport
// cannot be used with it. Agents learn their assignment from the prompt's
// closing block and from FOREMAN_ITEM, FOREMAN_STAGE, FOREMAN_WORKER and
// FOREMAN_ASSIGNMENT in their environment. The runtime writes
// the record 7 times for a plain story of 6 transitions and 17 effects (5
// transitions from events, the merge's result, and the last write that
// records the final effects done). On the durable SQLite store
// (synchronous=FULL) concurrent stories share each fsync (group commit);
// see BenchmarkStoriesInFlight, BenchmarkRuntimeStory and
// BenchmarkDurableTransitions.
package pipeline
