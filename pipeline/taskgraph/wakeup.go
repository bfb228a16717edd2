package taskgraph

import (
	"time"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/message"
)

// Handler names the coordinator's handlers. The zero value is
// HandleSpawnNext, so a zero WakeUp is the initial spawn.
type Handler uint8

const (
	HandleSpawnNext Handler = iota
	HandleCallback
	HandleCheck
	HandleResume
	// HandleUpdate is not a wake-up: it marks the Result of Core.Update.
	HandleUpdate
)

var handlerNames = [...]string{"handleSpawnNext", "handleCallback", "handleCheck", "handleResume", "taskUpdate"}

func (h Handler) String() string {
	if int(h) < len(handlerNames) {
		return handlerNames[h]
	}
	return "Handler(?)"
}

// Outcome is what a callback reports about its task, when it says.
type Outcome uint8

const (
	// OutcomeNone: the callback only wakes the coordinator; the task's
	// status is whatever the task list says (a worker updates its task
	// before it sends the callback).
	OutcomeNone Outcome = iota
	// OutcomeCompleted: the worker finished its task.
	OutcomeCompleted
	// OutcomeFailed: the worker gave up on its task.
	OutcomeFailed
)

// WakeUp is one reason the coordinator runs: a worker's callback, or a
// person's "check", "resume" or anything else (spawn next).
type WakeUp struct {
	Handler Handler
	// Role is the callback's "[role]". Assignment, when set, fences it: it
	// must be the current assignment of an active worker (of that role,
	// if Role is set). A callback without an assignment is matched by role
	// alone and may not carry an Outcome.
	Role       string
	Assignment foreman.AssignmentID
	// Task is the subject the callback claims to be about, if it says;
	// with an assignment, a different task makes the callback stale.
	Task    string
	Outcome Outcome
	// Text is the raw message, for logs.
	Text string
	// At is when the wake-up happened; the core never reads a clock.
	At time.Time
}

// WithTime returns w stamped with at.
func (w WakeUp) WithTime(at time.Time) WakeUp {
	w.At = at
	return w
}

// TaskUpdate changes one task's status from outside the coordinator: a worker
// marking its task completed or failed, a host or person parking a task for a
// person (Parked), a person releasing a parked task (Pending) or cancelling a
// task.
type TaskUpdate struct {
	Task string
	// To is Completed, Failed, Cancelled, Parked or Pending (only from
	// Parked).
	To Status
	// Assignment must be the task's current assignment for Completed and
	// Failed; for Parked it is checked when given (a person may omit it);
	// it is ignored for Cancelled and Pending.
	Assignment foreman.AssignmentID
	// From, when not empty, lists the statuses the task may be in for the
	// update to apply; from any other it is a *TransitionError and the
	// session is unchanged. It lets a host cancel a task only if it has
	// not started (From: Pending) without racing the coordinator that
	// starts it.
	From []Status
	At   time.Time
}

// Route decides the handler for a wake-up text by priority, through
// message.Router: a "[role]" tag of a known role (nil roles: DefaultRoles())
// is a callback; otherwise "check" or "status" ask for the report; "resume",
// "continue" or "next" resume; anything else spawns the next ready tasks.
// Matching is the message package's: case-insensitive substrings. A canonical
// callback line ("[tester] TEST-001 completed") names its task in
// WakeUp.Task; its status becomes an Outcome only through RouteEnvelope,
// which knows the assignment: a bare text cannot be fenced.
func Route(text string, roles []string) WakeUp {
	return route(text, "", time.Time{}, nil, roles)
}

// RouteEnvelope routes a message received with its sender's assignment:
// a callback is fenced by env.Assignment and, when its line is canonical,
// carries its status as the Outcome. At is env.ReceivedAt.
func RouteEnvelope(env message.Envelope, roles []string) WakeUp {
	return route(env.Raw, env.Assignment, env.ReceivedAt, env.Body, roles)
}

func route(text string, assignment foreman.AssignmentID, at time.Time, body message.Message, roles []string) WakeUp {
	if roles == nil {
		roles = DefaultRoles()
	}
	known := make([]message.Role, len(roles))
	for i, r := range roles {
		known[i] = message.Role(r)
	}
	r := message.Router{Roles: known}.Route(text)
	w := WakeUp{Text: text, At: at}
	switch r.Kind {
	case message.WakeCallback:
		w.Handler, w.Role, w.Assignment = HandleCallback, string(r.Role), assignment
		cb := r.Callback
		if c, ok := body.(message.Callback); ok {
			cb = c
		}
		w.Task = string(cb.Subject)
		if assignment != "" {
			switch cb.Status {
			case message.CallbackCompleted:
				w.Outcome = OutcomeCompleted
			case message.CallbackFailed:
				w.Outcome = OutcomeFailed
			}
		}
	case message.WakeCheck:
		w.Handler = HandleCheck
	case message.WakeResume:
		w.Handler = HandleResume
	default:
		w.Handler = HandleSpawnNext
	}
	return w
}
