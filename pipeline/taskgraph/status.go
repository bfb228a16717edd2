package taskgraph

import (
	"errors"
	"fmt"
)

// Status is where a task stands. The names are the task list's statuses
// (pending, in_progress, completed) plus failed, cancelled and parked.
type Status uint8

const (
	// Pending: created, not started. Ready once every blocker is completed.
	Pending Status = iota
	// InProgress: a worker holds a current assignment for it.
	InProgress
	// Completed: done. Only a completed blocker unblocks its dependents.
	Completed
	// Failed: its worker reported failure. The coordinator resets it to
	// pending (worker failure handling); until then it blocks dependents.
	Failed
	// Cancelled: withdrawn by a person. Terminal; never unblocks dependents.
	Cancelled
	// Parked: paused, waiting for a person (for example a story stopped by
	// a merge conflict). Unlike a failed task it is never reset or
	// respawned by the coordinator, and it never unblocks dependents; a
	// person releases it (back to pending), completes it or cancels it.
	Parked
)

var statusNames = [...]string{"pending", "in_progress", "completed", "failed", "cancelled", "parked"}

func (s Status) String() string {
	if int(s) < len(statusNames) {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// MarshalText writes the status's name ("in_progress", ...).
func (s Status) MarshalText() ([]byte, error) {
	if int(s) >= len(statusNames) {
		return nil, fmt.Errorf("taskgraph: unknown status %d", uint8(s))
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText reads a status's name.
func (s *Status) UnmarshalText(b []byte) error {
	st, err := ParseStatus(string(b))
	if err != nil {
		return err
	}
	*s = st
	return nil
}

// ParseStatus reads a status name; an unknown name matches ErrInvalidStatus.
func ParseStatus(name string) (Status, error) {
	for i, n := range statusNames {
		if n == name {
			return Status(i), nil
		}
	}
	return 0, fmt.Errorf("%w: %q", ErrInvalidStatus, name)
}

// ErrInvalidStatus is matched by an unknown status name.
var ErrInvalidStatus = errors.New("taskgraph: invalid status")

// Event moves a task between statuses.
type Event uint8

const (
	// EventStart: the coordinator spawns a worker for a ready task.
	EventStart Event = iota
	// EventComplete: the task's current worker reports it done.
	EventComplete
	// EventFail: the task's current worker reports failure.
	EventFail
	// EventReset: worker failure handling puts the task back to pending
	// (a failed task, or an in-progress task whose worker is gone).
	EventReset
	// EventCancel: a person withdraws the task.
	EventCancel
	// EventPark: the host or a person parks the task for a person.
	EventPark
	// EventUnpark: a person releases a parked task to be started again.
	EventUnpark
	numEvents
)

var eventNames = [...]string{"start", "complete", "fail", "reset", "cancel", "park", "unpark"}

func (e Event) String() string {
	if int(e) < len(eventNames) {
		return eventNames[e]
	}
	return fmt.Sprintf("Event(%d)", uint8(e))
}

const numStatuses = 6

// invalid marks a (status, event) pair that has no transition.
const invalid Status = 0xff

// transitions is the task state machine: transitions[from][event] = to.
var transitions = [numStatuses][numEvents]Status{
	//             start       complete   fail     reset    cancel     park     unpark
	Pending:    {InProgress, invalid, invalid, invalid, Cancelled, Parked, invalid},
	InProgress: {invalid, Completed, Failed, Pending, Cancelled, Parked, invalid},
	Completed:  {invalid, invalid, invalid, invalid, invalid, invalid, invalid},
	Failed:     {invalid, invalid, invalid, Pending, Cancelled, Parked, invalid},
	Cancelled:  {invalid, invalid, invalid, invalid, invalid, invalid, invalid},
	Parked:     {invalid, Completed, invalid, invalid, Cancelled, invalid, Pending},
}

// ErrInvalidTransition is matched by every *TransitionError.
var ErrInvalidTransition = errors.New("taskgraph: invalid transition")

// TransitionError is an event the task's status does not allow.
type TransitionError struct {
	Task  string
	From  Status
	Event Event
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("taskgraph: task %s: cannot %s a %s task", e.Task, e.Event, e.From)
}

// Is makes errors.Is(err, ErrInvalidTransition) true.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// NextStatus applies ev to from using the transition table. task only
// names the task in the error.
func NextStatus(task string, from Status, ev Event) (Status, error) {
	if int(from) < numStatuses && ev < numEvents {
		if to := transitions[from][ev]; to != invalid {
			return to, nil
		}
	}
	return from, &TransitionError{Task: task, From: from, Event: ev}
}
