package foreman

import "github.com/agentforeman/foreman/internal/ids"

// ErrInvalidID is matched (with errors.Is) by every id validation failure.
var ErrInvalidID = ids.ErrInvalid

// ItemID names an item of work: a story, a task, a bead. It becomes a path,
// a branch name and a commit trailer, so it is validated before any of those
// is built: ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$, no "..", not ending in ".lock".
type ItemID string

// Validate reports whether id is safe to use; the error matches ErrInvalidID.
func (id ItemID) Validate() error { return ids.Validate("item", string(id)) }

// WorkerID names a worker. Names are reused, so a WorkerID alone never
// identifies an assignment; see AssignmentID.
type WorkerID string

// Validate reports whether id is safe to use; the error matches ErrInvalidID.
func (id WorkerID) Validate() error { return ids.Validate("worker", string(id)) }

// AssignmentID is the fencing token of one attempt by one worker at one
// stage of one item. Every message a worker sends carries it; a message whose
// assignment is no longer current is stale and is never applied.
type AssignmentID string

// Validate reports whether id is safe to use; the error matches ErrInvalidID.
func (id AssignmentID) Validate() error { return ids.Validate("assignment", string(id)) }
