// Package taskgraph is the task-graph coordinator: a dependency graph of
// tasks owned by worker roles, and the event-driven monitor that advances
// it one wake-up at a time.
//
// # Graph
//
// A Graph holds tasks (subject, role, description, blockedBy, status,
// current assignment). NewGraph and Graph.Add validate what they create:
// subjects like an foreman.ItemID (at most MaxSubjectLen characters),
// roles from a configurable set (DefaultRoles(): eleven by default), every
// blocker an existing task, no duplicate subjects and no cycles; the
// errors are typed (*CycleError names the cycle, *UnknownBlockerError,
// *UnknownRoleError, *DuplicateTaskError). A task is ready when it is
// pending and every blocker is completed: a failed, cancelled or parked
// blocker never unblocks. Task statuses (pending, in_progress, completed,
// failed, cancelled, parked) change only through the transition table of
// NextStatus; an invalid (status, event) pair is a *TransitionError.
//
// Parked is Foreman's addition to the task list's statuses: a task paused,
// waiting for a person (a story stopped by a merge conflict, say). A host or
// person parks a task with Runtime.Update (TaskUpdate{To: Parked}, fenced by
// the assignment when one is given). Unlike a failed task, which worker
// failure handling resets to pending and respawns, a parked task is never
// reset or spawned: its worker is released when processed (a late completion
// does not undo the parking), the pipeline is not complete while it is parked
// (a stall names it), and the report shows it with its own icon (||) and a
// "Parked, waiting for a person" line. A person releases it (TaskUpdate{To:
// Pending}: a new assignment at the next spawn), completes it (with its
// assignment) or cancels it.
//
// PipelineTasks gives the built-in task chains per Mode (spec-only 12 tasks,
// impl-only 4, fe-only 3, fullstack 6, full-lifecycle 16,
// full-lifecycle-fe 18).
//
// # Core
//
// Core is pure: Handle(session, wake-up) returns a new session and a
// Result with the effects to carry out; it does no I/O, reads no clock
// (time arrives in the WakeUp) and never modifies the session it is
// given (it copies only what a step changes). Apply is the same step for
// a caller that owns its session and wants it changed in place, without
// the copies. Route picks the handler for a text by these priorities
// (a "[role]" tag of a known role, then "check"/"status", then
// "resume"/"continue"/"next", else spawn-next), through the
// pipeline/message router; RouteEnvelope does the same for a message that
// arrived with its sender's assignment. The four handlers follow the
// decision trees drawn in their comments in handlers.go:
//
//   - handleSpawnNext spawns every ready task (task → in_progress, a
//     task_unblocked log, a spawn effect under a new assignment id, an
//     active_workers entry), or, with CoreConfig.MaxActive set, only as
//     many as keep at most MaxActive tasks in progress: the others stay
//     pending, are named in Result.Held and in the report, and are
//     spawned, in creation order, as completions free slots. Nothing ready with work in progress reports
//     the wait; nothing ready and nothing running is PIPELINE_COMPLETE when
//     no task is pending or failed and every task the mode expects exists,
//     and a stall otherwise, reported with each blocked task and why.
//   - handleCallback fences the callback, then processes its worker:
//     completed → released, checkpoint check, spawn next; in progress → a
//     progress message and STOP; failed → worker failure handling (task reset
//     to pending, error logged, "will retry on next resume"). Without a
//     matching worker it scans all active workers for completed tasks.
//   - handleResume releases a checkpoint pause, resets orphaned
//     in-progress tasks, and checks every active worker: completed ones are
//     processed, running ones reported, failed ones reset; then it spawns
//     next unless everything is still running.
//   - handleCheck reports, changing nothing.
//
// Core.Update applies a TaskUpdate (a worker marking its task completed or
// failed, a person cancelling it) and nothing else: the coordinator acts on
// the change at its next wake-up. A checkpoint (DefaultCheckpoints():
// DISCUSS-006 in the full-lifecycle modes) pauses the session when its task
// completes: nothing is spawned until a resume.
//
// Fencing: every spawn gets an AssignmentID ("<subject>.<n>", unique in
// the session). A callback or update carrying an assignment is applied
// only if that assignment is current for its task (and its role and task,
// if named, match); a repeat of a processed completion is a Duplicate
// (acknowledged again with an EffectAck, not reprocessed) and anything
// else is Stale (logged, ignored); both are counted in Session.Counters.
// A callback without an assignment is matched by role alone and cannot
// report an outcome.
//
// After every step a validation table runs (Core.Validate):
// active_workers consistent with the task list, no orphaned in-progress
// task, every expected task present, a completed session really complete,
// known roles. Violations are reported and returned in the Result.
//
// # Status
//
// Core.Status builds a StatusReport (JSON-tagged); its Text is the
// "[coordinator] Pipeline Status" block: mode and progress, the execution
// graph with the icons done, >>>, o and . (plus x for failed, - for cancelled
// and || for parked) and the BE/FE tree, active workers with their elapsed
// time, ready tasks and the commands line. The built-in modes' tasks are
// drawn by phase (a spec chain, then PLAN forking into BE and FE branches);
// the tasks of a custom graph (subjects outside those phases) are drawn
// under "Tasks" by dependency level, one per line with their blockers
// ("[o US-004] ← US-001"), so fan-outs and joins stay visible.
//
// # Runtime
//
// Runtime is the shell: each method loads the session from a
// pipeline/store.Store (one record of RecordKind per session, and one of
// TaskRecordKind per task), first re-issues effects a crashed invocation left
// pending, lets the core take one step, saves the new session together with
// its pending effects (persist before acting, with optimistic concurrency and
// retries), and carries the effects out through a Spawner and a Reporter,
// then records them done in one write (two writes per step, whatever its
// effects). A Runtime keeps the sessions it steps in memory and reads only
// the session record's version per step (everything again when another
// writer changed it); a step changes the session in place and writes the
// session record and the records of the tasks it changed. The graph keeps
// its counts by status, each task's unmet blockers and its ready tasks as
// statuses change, so a step costs what it touches, not the size of the
// graph (Handle, which copies, copies the task states). Spawns are idempotent by
// assignment id (the Spawner contract); reports and logs may be repeated
// after a crash and carry Effect.Key to tell. A new Runtime per invocation
// makes a coordinator that takes one step per invocation; Run is the
// long-running mode, fed by a channel (and optionally by a periodic resume on
// the configured clock), over the same steps. DispatcherSpawner and
// WakeUpFromEvent connect a worker.Dispatcher.
package taskgraph
