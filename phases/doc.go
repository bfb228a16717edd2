// Package phases runs one agent's work as a loop of iterations, each made
// of four phases: build (the agent changes the workspace), snapshot (record
// what changed), verify (run the gate plan) and feedback (turn a failed
// verification into instructions for the next build).
//
// The layers, bottom up:
//
//   - Services (services.go): AgentDriver, Snapshotter, Verifier,
//     FeedbackGenerator and ResultPersister, small non-generic interfaces a
//     host may implement. Defaults ship with Foreman: a command AgentDriver
//     in phases/agentcmd, a git Snapshotter in phases/gitsnap, a gate
//     Verifier and FeedbackGenerator in phases/gates, and FilePersister
//     (JSON files written atomically) in this package.
//   - Handlers: BuildPhaseHandler, SnapshotPhaseHandler, VerifyPhaseHandler
//     and FeedbackPhaseHandler, each of the generic PhaseHandler shape and
//     of a non-generic interface (BuildHandler, ...) that can be mocked. A
//     handler never returns an error: a failed phase is a result with
//     Success false and a typed *PhaseError. Persistence failures are
//     logged and never fail a phase; failed feedback generation falls back
//     to FallbackFeedback.
//   - PhaseOrchestrator.ExecuteIteration runs one iteration and says which
//     RunEvent it ended with: BUILD_FAILED and SNAPSHOT_FAILED exit early,
//     an empty snapshot is NO_CHANGES (never a success unless
//     SnapshotOptions.AllowEmpty), VERIFY_PASSED ends the run, and only a
//     failed verification produces feedback (VERIFY_FAILED_RETRYABLE).
//   - The run state machine: a transition table (Transitions, NextState)
//     over RunState and RunEvent. An invalid pair is a *TransitionError
//     matching ErrInvalidTransition.
//   - RunLoop.Run drives a run through the state machine until verification
//     passes or a limit ends it: max iterations; wall clock
//     (Limits.MaxWallClock, measured on Services.Clock: with the real
//     clock the run's context gets a deadline, visible to services in
//     ctx.Deadline(), whose cause is ErrWallClockExceeded; with any other
//     clock, such as a fake one in tests, the run adds no deadline and a
//     timer on that clock cancels the context with the same cause; either
//     way the agent is given the time that remains); loop detection (same
//     diff or same failing output N iterations running, reason
//     loop_detected; no change at all N iterations running, reason
//     no_changes; an agent that was refused tools by its CLI's permission
//     rules and changed nothing, at once after that iteration, reason
//     permission_denied, naming the tools: the same permissions would
//     refuse it again); a token and cost
//     budget; or cancellation (CANCELED, then the Cleanup hook). It returns
//     a RunResult with every iteration's phase results and durations, the
//     states visited and the final event, state, outcome and reason.
//
// Error convention: an error returned by a service or by Run is a system
// fault; a domain outcome (the agent failed, a gate failed, the budget ran
// out) is a field of the result.
//
// Mocks of every interface, generated with mockgen, are in phases/phasesmock.
package phases
