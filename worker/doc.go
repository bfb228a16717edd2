// Package worker is the Dispatcher: it decides which worker works on which
// item, watches that each worker is alive and making progress, handles
// review rejections, escalates what is stuck, and supervises the agent
// processes through an in-process Runtime.
//
// # Pool and assignment
//
// Submit queues ready work; the queue is ordered by priority, then FIFO (a
// requeued item keeps its place). Whenever work or capacity appears, the
// Dispatcher's assign cycle hands queued items to free workers, up to
// MaxWorkers. Workers move Idle → Reserved → Busy (→ Reviewing) → Idle, and
// items Queued → Assigned (→ InReview, → Recovering after a crash) → Done or
// Parked, both through
// transition tables (NextWorkerState, NextItemState; an invalid pair is a
// *TransitionError). A Done item is forgotten at once; a Parked one is held
// until submitted again, or until the host forgets it (Forget), so that
// what the Dispatcher holds does not grow with the work it has seen. Two modes share one Dispatcher: ModePooled keeps
// MaxWorkers long-lived workers taking successive assignments; ModeFresh
// spawns a fresh worker for every assignment and shuts it down after, so no
// context leaks between stages or attempts.
//
// # Fencing
//
// Every assignment gets a new AssignmentID. Every message (heartbeat,
// status, done, ready-for-review, quality-gate result, failure) and every
// review verdict carries the worker id and the assignment id, and is applied
// only if that assignment is the worker's current one. Anything else is
// Stale; a repeat of the completion that ended an assignment is Duplicate.
// Both are ignored, reported through the events hook and counted in Stats,
// so a late DONE from an old assignment can never complete the work of a new
// one under the same worker name.
//
// # Liveness and progress
//
// Each Busy assignment has health.Deadlines: liveness (default 45 s;
// heartbeats every 10 s) and progress (default 15 min), and optionally an
// attempt deadline. Every message of the assignment moves liveness; progress
// moves only on meaningful events: DONE, READY_FOR_REVIEW, the first running
// STATUS, a quality-gate pass or fail, and a heartbeat reporting a new
// commit. A worker that heartbeats is alive, not necessarily getting
// anywhere, so the two are watched apart (see "Liveness is not progress" in
// docs/architecture.md).
//
// A liveness expiry is not a crash. It starts health's crash-detection
// protocol, health.Step, which the Dispatcher's deterministic core drives
// itself: the worker is marked suspicious and a PROBE command goes through
// the Transport (the Runtime answers it with a StatusAlive STATUS from the
// goroutine supervising the agent, while the agent's execution runs). Any
// message of that assignment within ProbeTimeout (default 2 min) clears the
// suspicion; messages of another assignment are fenced off as usual and
// clear nothing. A probe left unanswered for ProbeTimeout, one that could
// not be sent, or another silence while probing confirms the crash: the
// worker's process is killed and the item is requeued within CrashBudget
// (default 1), or parked with a CRASH_LIMIT escalation beyond it; never
// lost. Before requeueing, Config.ItemChecker (optional) is asked whether
// the item is still open: a closed item is dropped (EventItemClosed), and an
// item whose state cannot be learnt is parked with ITEM_CHECK_FAILED. In
// practice the probe timeout decides: health.Deadlines reports a liveness
// expiry once and re-arms it only on the assignment's next message, which
// answers the probe. The core does not use health.Monitor: Monitor keeps its
// own state per item, calls its services synchronously under its own locks
// and requires checkpoints and a Resumer, while the Dispatcher already owns
// the assignment and must keep all decisions in one lock-guarded core with
// no I/O. So the core holds a health.State per assignment, feeds Step what
// it sees and turns Step's effects into commands and timers for the shell
// (probe timeouts run on a second health.Deadlines); resuming is
// requeueing, since the worker package keeps no checkpoints. An agent that
// exits unsuccessfully (FAILED) has already told us it crashed, so that is
// counted against CrashBudget at once, without a probe.
//
// Slow is not stuck. When a worker's progress deadline passes, the
// Dispatcher first gathers evidence of work since its last progress
// (WorkEvidence; the Runtime reports the agent's output lines, whether the
// worktree's files changed, .git excluded, and the CPU time of the agent's
// process group read from /proc, each counted from the assignment's start,
// the last progress the Runtime saw or the previous check). The core
// decides on what the shell gathered: any output, any file change or at
// least SlowWorkerMinCPU (default 1 s) of CPU time earns an extension of
// SlowWorkerExtension (default ProgressTimeout) and an EventSlowWorker, up
// to SlowWorkerExtensions (default 1) per assignment. A stalled worker
// without evidence, or with its extensions used up, or one over the
// attempt deadline, gets a STUCK_WORKER escalation, is killed, and its item
// is requeued within StallBudget (default 1), else parked. Deadlines stop
// while an assignment waits for its reviewer.
//
// # Rate limits and questions for a person
//
// Two ways an agent stops are not crashes. MsgRateLimited (the Runtime
// sends it when the agent's result carries a phases.AgentRateLimit, as
// agentcmd reads from Claude Code and Codex output): the worker is freed,
// the item goes RateLimited, EventRateLimited reports the provider's words,
// the reset it named and the backoff, and the item is queued again after
// RateLimitBackoff (default 1 min) doubled per rate-limited attempt in a row
// up to RateLimitMaxBackoff (default 30 min), never before the named reset,
// plus up to RateLimitJitter (default 30 s). No budget applies. While items
// back off (RateLimited), a host may lower concurrency with SetMaxActive.
// MsgNeedsPerson (the agent asked a question nobody answered, or was refused
// a permission and failed): EventWaitingForPerson, a NEEDS_PERSON escalation
// whose Question holds the text, the agent is reset and the item parked.
// Nothing answers the question; a person does, then submits the item again
// (with the answer in its MemoryContext).
//
// # Review rejection
//
// A worker that reports READY_FOR_REVIEW waits in Reviewing for Review. A
// rejection reassigns the item under a new assignment id with the next
// Attempt and a MemoryContext holding every earlier reviewer's feedback
// (pooled: to the same worker; fresh: to a fresh one); the pending
// quality-gate output is cleared on every new assignment. The rejection
// after MaxReviewRejections (default 2) escalates REVIEW_LIMIT, parks the
// item, resets the worker's process and returns the worker to Idle with its
// item, worktree and pending output cleared, so it takes new work in the
// same assign cycle. When StuckQGIdentical (default 3) of an item's last
// StuckQGWindow (default 10) failing quality-gate outputs are identical, the
// item is escalated STUCK_QG and parked (health.StuckQG; three identical in
// a row always count, and so does a worker alternating between a few
// failures). The detector keeps a short history per item; every way an item
// leaves the workers (completed, parked, found closed) resets it.
//
// # Escalations, events and budgets
//
// Escalations are typed (StuckWorker, ReviewLimit, CrashLimit,
// ItemCheckFailed, StuckQG, BudgetExceeded, NeedsPerson) and carry item, stage, worker, assignment, reason, the
// counters and a suggested action; they go to the Escalator (HealthEscalator
// adapts a health.Escalator). Every lifecycle change goes to the one
// OnEvent hook, in order; SlogEvents logs them. Token and cost usage reported
// by agents is summed per item and overall. An item over ItemBudget is
// escalated once and not assigned again; over TotalBudget, the Dispatcher
// escalates once and assigns nothing more (queued items stay queued).
// Budgets are checked when usage is reported and before each assignment, so
// work already running overshoots by whatever it spends before it reports
// (with the Runtime: its whole execution, reported when it ends).
//
// # Runtime and transport
//
// Commands reach workers through a Transport (assign, kill, reset,
// shutdown, probe); messages come back through Deliver. The default Transport is
// the in-process Runtime, which runs one phases.AgentDriver execution per
// assignment in the assignment's worktree (agentcmd runs it as a subprocess
// in its own process group). The Runtime, not the agent, heartbeats, and
// each heartbeat carries the last output time and the worktree's HEAD
// (CommitReader; default: what git rev-parse HEAD prints, read from the
// worktree's git files without a process where they are plain), so a heartbeat is evidence of
// work. KILL, RESET and SHUTDOWN cancel the execution, which terminates the
// process group (SIGTERM, grace, SIGKILL); nothing of one assignment survives
// into the next. PROBE is answered by the supervising goroutine, so a
// Runtime that is frozen (or whose messages are lost) does not answer.
//
// Quality-gate results reach the Dispatcher as MsgQGResult. With
// Config.Gate set, the Runtime runs the gate (a phases.Verifier, such as
// phases/gates) in the worktree after every successful agent execution and
// sends each result, its QGOutput a digest of the failed checks (QGDigest);
// a failure is fed back to the agent, which runs again within the same
// assignment, up to Gate.Rounds executions, before the assignment ends
// FAILED. Without a gate the Runtime sends no MsgQGResult, and stuck
// quality gates cannot be detected.
//
// A network or database transport implements Transport and calls Deliver,
// including a MsgQGResult for every gate run its workers make (a stable
// digest or text of the failure as QGOutput).
//
// # Concurrency and shutdown
//
// The pool and queue are a deterministic core (no I/O, no clock reads; time
// is passed in) guarded by one mutex; its effects (commands, escalations,
// events) are carried out after the lock is released, strictly in the order
// they were decided, by one goroutine at a time. Shutdown stops assigning,
// waits up to ShutdownTimeout for running work, kills the rest (their items
// go back to Queued), stops every worker and reports those that did not stop
// within KillTimeout as a *multierror.Error of *StopError. Shutdown and
// Close are safe to call twice. All time comes from Config.Clock.
//
// Package workermock holds gomock mocks of Transport, Inbox, Closer,
// Escalator and CommitReader.
package worker
