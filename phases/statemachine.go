package phases

import (
	"errors"
	"fmt"
)

// RunState is the state of a run.
type RunState string

// Run states. SUCCEEDED, FAILED and CANCELED are terminal.
const (
	StateQueued       RunState = "QUEUED"
	StateLeased       RunState = "LEASED"
	StateBuilding     RunState = "BUILDING"
	StateSnapshotting RunState = "SNAPSHOTTING"
	StateVerifying    RunState = "VERIFYING"
	StateFeedback     RunState = "FEEDBACK"
	StateSucceeded    RunState = "SUCCEEDED"
	StateFailed       RunState = "FAILED"
	StateCanceled     RunState = "CANCELED"
)

// Terminal reports whether no transition leaves s.
func (s RunState) Terminal() bool {
	return s == StateSucceeded || s == StateFailed || s == StateCanceled
}

// RunEvent moves a run from one state to another.
type RunEvent string

// Run events. Each is emitted by the RunLoop or the PhaseOrchestrator on a
// real path; see the transition table for where each is accepted.
const (
	EventWorkspaceAcquired     RunEvent = "WORKSPACE_ACQUIRED"
	EventBuildStarted          RunEvent = "BUILD_STARTED"
	EventBuildCompleted        RunEvent = "BUILD_COMPLETED"
	EventBuildFailed           RunEvent = "BUILD_FAILED"
	EventSnapshotCompleted     RunEvent = "SNAPSHOT_COMPLETED"
	EventSnapshotFailed        RunEvent = "SNAPSHOT_FAILED"
	EventNoChanges             RunEvent = "NO_CHANGES"
	EventVerifyPassed          RunEvent = "VERIFY_PASSED"
	EventVerifyFailedRetryable RunEvent = "VERIFY_FAILED_RETRYABLE"
	EventVerifyFailedTerminal  RunEvent = "VERIFY_FAILED_TERMINAL"
	EventFeedbackGenerated     RunEvent = "FEEDBACK_GENERATED"
	EventLimitExceeded         RunEvent = "LIMIT_EXCEEDED"
	EventUserCanceled          RunEvent = "USER_CANCELED"
	EventSystemError           RunEvent = "SYSTEM_ERROR"
)

// AllStates lists every run state.
func AllStates() []RunState {
	return []RunState{StateQueued, StateLeased, StateBuilding, StateSnapshotting, StateVerifying,
		StateFeedback, StateSucceeded, StateFailed, StateCanceled}
}

// AllEvents lists every run event.
func AllEvents() []RunEvent {
	return []RunEvent{EventWorkspaceAcquired, EventBuildStarted, EventBuildCompleted, EventBuildFailed,
		EventSnapshotCompleted, EventSnapshotFailed, EventNoChanges, EventVerifyPassed,
		EventVerifyFailedRetryable, EventVerifyFailedTerminal, EventFeedbackGenerated,
		EventLimitExceeded, EventUserCanceled, EventSystemError}
}

// Transition is one row of the transition table.
type Transition struct {
	From  RunState `json:"from"`
	Event RunEvent `json:"event"`
	To    RunState `json:"to"`
}

// transitionCount is the number of rows in the transition table; a test
// checks that no row is left empty.
const transitionCount = 29

// transitionTable is the run state machine. It is returned by value (an
// array, no allocation) so that nobody can change it.
//
// Every non-terminal state accepts the three run-ending events
// USER_CANCELED, SYSTEM_ERROR and LIMIT_EXCEEDED. NO_CHANGES sends an
// empty snapshot to feedback rather than to verification, and
// LIMIT_EXCEEDED (max iterations, wall clock, budget, loop detected, no
// changes) gives FEEDBACK a way to FAILED: without it, a run in FEEDBACK
// could only go back to BUILDING, and nothing would stop a run that never
// passes.
func transitionTable() [transitionCount]Transition {
	return [transitionCount]Transition{
		{StateQueued, EventWorkspaceAcquired, StateLeased},
		{StateQueued, EventUserCanceled, StateCanceled},
		{StateQueued, EventSystemError, StateFailed},
		{StateQueued, EventLimitExceeded, StateFailed},

		{StateLeased, EventBuildStarted, StateBuilding},
		{StateLeased, EventUserCanceled, StateCanceled},
		{StateLeased, EventSystemError, StateFailed},
		{StateLeased, EventLimitExceeded, StateFailed},

		{StateBuilding, EventBuildCompleted, StateSnapshotting},
		{StateBuilding, EventBuildFailed, StateFailed},
		{StateBuilding, EventUserCanceled, StateCanceled},
		{StateBuilding, EventSystemError, StateFailed},
		{StateBuilding, EventLimitExceeded, StateFailed},

		{StateSnapshotting, EventSnapshotCompleted, StateVerifying},
		{StateSnapshotting, EventSnapshotFailed, StateFailed},
		{StateSnapshotting, EventNoChanges, StateFeedback},
		{StateSnapshotting, EventUserCanceled, StateCanceled},
		{StateSnapshotting, EventSystemError, StateFailed},
		{StateSnapshotting, EventLimitExceeded, StateFailed},

		{StateVerifying, EventVerifyPassed, StateSucceeded},
		{StateVerifying, EventVerifyFailedRetryable, StateFeedback},
		{StateVerifying, EventVerifyFailedTerminal, StateFailed},
		{StateVerifying, EventUserCanceled, StateCanceled},
		{StateVerifying, EventSystemError, StateFailed},
		{StateVerifying, EventLimitExceeded, StateFailed},

		{StateFeedback, EventFeedbackGenerated, StateBuilding},
		{StateFeedback, EventLimitExceeded, StateFailed},
		{StateFeedback, EventUserCanceled, StateCanceled},
		{StateFeedback, EventSystemError, StateFailed},

		// SUCCEEDED, FAILED and CANCELED are terminal: no rows.
	}
}

// Transitions returns the transition table.
func Transitions() []Transition {
	table := transitionTable()
	return append([]Transition(nil), table[:]...)
}

// ErrInvalidTransition is matched by every *TransitionError.
var ErrInvalidTransition = errors.New("phases: invalid run transition")

// TransitionError reports an event that the current state does not accept.
type TransitionError struct {
	From  RunState
	Event RunEvent
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("phases: invalid run transition: %s does not accept %s", e.From, e.Event)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// NextState is the pure transition function: the state that event leads to
// from state, or a *TransitionError.
func NextState(from RunState, event RunEvent) (RunState, error) {
	for _, t := range transitionTable() {
		if t.From == from && t.Event == event {
			return t.To, nil
		}
	}
	return "", &TransitionError{From: from, Event: event}
}

// Outcome summarises how a run ended.
type Outcome string

// Run outcomes.
const (
	OutcomePassed             Outcome = "passed"
	OutcomeFailedBuild        Outcome = "failed_build"
	OutcomeFailedSnapshot     Outcome = "failed_snapshot"
	OutcomeFailedVerification Outcome = "failed_verification"
	OutcomeFailedLimit        Outcome = "failed_limit"
	OutcomeFailedError        Outcome = "failed_error"
	OutcomeCanceled           Outcome = "canceled"
)

// Reason says why a run ended; it refines the Outcome.
type Reason string

// Run end reasons. LIMIT_EXCEEDED carries one of the six limit reasons
// (max_iterations, wall_clock, budget_exceeded, loop_detected, no_changes,
// permission_denied).
const (
	ReasonVerified          Reason = "verified"
	ReasonBuildFailed       Reason = "build_failed"
	ReasonSnapshotFailed    Reason = "snapshot_failed"
	ReasonVerificationError Reason = "verification_error"
	ReasonMaxIterations     Reason = "max_iterations"
	ReasonWallClock         Reason = "wall_clock"
	ReasonBudgetExceeded    Reason = "budget_exceeded"
	// ReasonLoopDetected: the same diff or the same failing gate output
	// Limits.LoopThreshold iterations running.
	ReasonLoopDetected Reason = "loop_detected"
	// ReasonNoChanges: the agent changed nothing at all
	// Limits.LoopThreshold iterations running.
	ReasonNoChanges Reason = "no_changes"
	// ReasonPermissionDenied: the agent was refused tools (its CLI's
	// permission rules) and changed nothing, in one iteration. Running it
	// again with the same permissions would be refused the same way, so
	// the run ends at once, naming the refused tools.
	ReasonPermissionDenied Reason = "permission_denied"
	ReasonCanceled         Reason = "canceled"
	ReasonSystemError      Reason = "system_error"
)

// OutcomeForEvent is the outcome of a run ended by a terminal event, and
// the reason when the event alone determines it (LIMIT_EXCEEDED does not:
// its reason is carried by the run). ok is false for events that do not
// end a run.
func OutcomeForEvent(event RunEvent) (outcome Outcome, reason Reason, ok bool) {
	switch event {
	case EventVerifyPassed:
		return OutcomePassed, ReasonVerified, true
	case EventBuildFailed:
		return OutcomeFailedBuild, ReasonBuildFailed, true
	case EventSnapshotFailed:
		return OutcomeFailedSnapshot, ReasonSnapshotFailed, true
	case EventVerifyFailedTerminal:
		return OutcomeFailedVerification, ReasonVerificationError, true
	case EventLimitExceeded:
		return OutcomeFailedLimit, "", true
	case EventUserCanceled:
		return OutcomeCanceled, ReasonCanceled, true
	case EventSystemError:
		return OutcomeFailedError, ReasonSystemError, true
	}
	return "", "", false
}

// ErrIterationRebuilt is returned when something tries to build an
// iteration that was already built: no state runs twice.
var ErrIterationRebuilt = errors.New("phases: iteration already built")

// machine is one run's state: the table applied to a current state, with
// the iteration counter and the guard against running a phase twice.
type machine struct {
	state     RunState
	iteration int // incremented on every entry into BUILDING
	built     int // last iteration whose build was started
	visited   []RunState
}

func newMachine() *machine {
	return &machine{state: StateQueued, visited: []RunState{StateQueued}}
}

// fire applies event; on an invalid pair the state is unchanged.
func (m *machine) fire(event RunEvent) (Transition, error) {
	to, err := NextState(m.state, event)
	if err != nil {
		return Transition{}, err
	}
	t := Transition{From: m.state, Event: event, To: to}
	m.state = to
	m.visited = append(m.visited, to)
	if to == StateBuilding {
		m.iteration++
	}
	return t, nil
}

// startBuild claims the current iteration's build. It fails unless the run
// is BUILDING an iteration that has not been built yet.
func (m *machine) startBuild() error {
	if m.state != StateBuilding {
		return fmt.Errorf("%w: run is %s, not %s", ErrIterationRebuilt, m.state, StateBuilding)
	}
	if m.built >= m.iteration {
		return fmt.Errorf("%w: iteration %d", ErrIterationRebuilt, m.iteration)
	}
	m.built = m.iteration
	return nil
}
