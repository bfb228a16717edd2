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
// items Queued → Assigned (→ InReview) → Done or Parked, both through
// transition tables (NextWorkerState, NextItemState; an invalid pair is a
// *TransitionError). Two modes share one Dispatcher: ModePooled keeps
// MaxWorkers long-lived workers taking successive assignments (seed 004);
// ModeFresh spawns a fresh worker for every assignment and shuts it down
// after (seeds 000 and 003), so no context leaks between stages or attempts.
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
// attempt deadline. Heartbeats move only liveness. Progress moves on
// meaningful events: DONE, READY_FOR_REVIEW, the first running STATUS, a
// quality-gate pass or fail, and a heartbeat reporting a new commit. A dead
// worker (liveness) is killed and its item requeued within CrashBudget
// (default 1) or parked with a CRASH_LIMIT escalation: never lost. A stalled
// worker (progress, or the attempt deadline) gets a STUCK_WORKER escalation,
// is killed, and its item is requeued within StallBudget (default 1), else
// parked. Deadlines stop while an assignment waits for its reviewer. The
// crash-detection protocol of health.Monitor (probe before declaring a crash,
// resume from a checkpoint) is not wired in: a liveness expiry counts as a
// crash directly.
//
// # Review rejection (seed 004)
//
// A worker that reports READY_FOR_REVIEW waits in Reviewing for Review. A
// rejection reassigns the item under a new assignment id with the next
// Attempt and a MemoryContext holding every earlier reviewer's feedback
// (pooled: to the same worker; fresh: to a fresh one); the pending
// quality-gate output is cleared on every new assignment. The rejection
// after MaxReviewRejections (default 2) escalates REVIEW_LIMIT, parks the
// item, resets the worker's process and returns the worker to Idle with its
// item, worktree and pending output cleared, so it takes new work in the
// same assign cycle. StuckQGIdentical (default 3) identical failing
// quality-gate outputs in a row for an item escalate STUCK_QG (health.StuckQG).
//
// # Escalations, events and budgets
//
// Escalations are typed (StuckWorker, ReviewLimit, CrashLimit, StuckQG,
// BudgetExceeded) and carry item, stage, worker, assignment, reason, the
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
// shutdown); messages come back through Deliver. The default Transport is
// the in-process Runtime, which runs one phases.AgentDriver execution per
// assignment in the assignment's worktree (agentcmd runs it as a subprocess
// in its own process group). The Runtime, not the agent, heartbeats, and
// each heartbeat carries the last output time and the worktree's HEAD
// (CommitReader; default git rev-parse HEAD), so a heartbeat is evidence of
// work. KILL, RESET and SHUTDOWN cancel the execution, which terminates the
// process group (SIGTERM, grace, SIGKILL); nothing of one assignment survives
// into the next. A network or database transport implements Transport and
// calls Deliver.
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
// Package workermock holds gomock mocks of Transport, Escalator and
// CommitReader.
package worker
