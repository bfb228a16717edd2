package health

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
)

//go:generate go tool mockgen -destination healthmock/mocks.go -package healthmock github.com/agentforeman/foreman/health Prober,ItemChecker,Escalator,Resumer,CheckpointLoader,DoneMarkers,Completer

// The services Monitor needs, each a small interface the host implements.
// A returned error is a fault of the service (store down, transport
// broken); Monitor turns it into the protocol's failure event, except when
// the context is done, which stops the call and leaves the effect pending.

// Prober sends the status probe to a worker.
type Prober interface {
	Probe(ctx context.Context, p Probe) error
}

// Probe is a status check addressed to one assignment's worker.
type Probe struct {
	Item       foreman.ItemID
	Stage      int
	Assignment foreman.AssignmentID
	Worker     foreman.WorkerID
	// Text is the message to send (ProbeText); ParseStatusReply reads the
	// answer it asks for.
	Text string
}

// ItemChecker reports whether an item is still open. Monitor asks before
// every resume: a restart once re-primed a worker onto closed work and
// produced a duplicate merge.
type ItemChecker interface {
	ItemOpen(ctx context.Context, item foreman.ItemID) (bool, error)
}

// Escalator hands an escalation to a person (or whatever stands for one).
type Escalator interface {
	Escalate(ctx context.Context, e Escalation) error
}

// Resumer restarts a crashed assignment as the plan says and returns the
// new assignment that now holds the item.
type Resumer interface {
	Resume(ctx context.Context, plan ResumePlan) (Resumed, error)
}

// CheckpointLoader reads an item's checkpoint; CheckpointStore is one.
// A missing checkpoint must match ErrNoCheckpoint.
type CheckpointLoader interface {
	LoadCheckpoint(ctx context.Context, item foreman.ItemID) (Checkpoint, error)
}

// DoneMarkers reports whether a worker left its done marker (for example
// a done.flag file), which it writes once its completion was sent. A marker on an
// assignment still being watched means the completion was lost.
type DoneMarkers interface {
	DoneMarkerExists(ctx context.Context, s Subject) (bool, error)
}

// Completer receives a completion rebuilt from the checkpoint after the
// original message was lost. It should verify the work (for example
// re-read the item's state on the board) and process it as it would the
// real message; it must be
// idempotent, since a failed call is re-issued.
type Completer interface {
	CompleteFromCheckpoint(ctx context.Context, c SynthesizedCompletion) error
}

// Subject is one assignment watched by Monitor.
type Subject struct {
	Item       foreman.ItemID
	Stage      int
	Assignment foreman.AssignmentID
	Worker     foreman.WorkerID
	// Crashes already confirmed for this item (restored from persisted
	// state), counted against the crash budget.
	Crashes int
}

// ResumeMode is how a crashed assignment is resumed.
type ResumeMode uint8

const (
	// ResumeSession resumes the agent's own session: full context kept.
	ResumeSession ResumeMode = iota + 1
	// ResumeFresh starts a fresh worker; Prompt carries the CHECKPOINT
	// RESUME block when a checkpoint exists.
	ResumeFresh
)

func (m ResumeMode) String() string {
	switch m {
	case ResumeSession:
		return "session"
	case ResumeFresh:
		return "fresh"
	}
	return fmt.Sprintf("ResumeMode(%d)", uint8(m))
}

// ResumePlan tells the Resumer what to start.
type ResumePlan struct {
	Item               foreman.ItemID
	Stage              int
	PreviousAssignment foreman.AssignmentID
	PreviousWorker     foreman.WorkerID
	Mode               ResumeMode
	// Session is the agent session to resume (ResumeSession).
	Session string
	// Prompt is the rendered CHECKPOINT RESUME block to append to the
	// stage's prompt (ResumeFresh); empty when there is no checkpoint.
	Prompt string
	// Checkpoint is the checkpoint the plan was made from, if any.
	Checkpoint *Checkpoint
	// Crashes is the number of crashes confirmed so far, this one included.
	Crashes int
}

// Resumed is the assignment that took over after a resume.
type Resumed struct {
	Assignment foreman.AssignmentID
	Worker     foreman.WorkerID
	Mode       ResumeMode
}

// SynthesizedCompletion is a lost completion rebuilt from the checkpoint.
type SynthesizedCompletion struct {
	Item       foreman.ItemID
	Stage      int
	Assignment foreman.AssignmentID
	Worker     foreman.WorkerID
	Checkpoint Checkpoint
}

// Escalation asks a person to act. It says what happened, to which item at
// which stage, with the counters that led there, and what to do next.
type Escalation struct {
	Item       foreman.ItemID
	Stage      int
	Assignment foreman.AssignmentID
	Worker     foreman.WorkerID
	Reason     PauseReason
	// Message says what happened, in a sentence.
	Message string
	// Detail is the underlying error text, when there is one.
	Detail          string
	Crashes         int
	CrashBudget     int
	Probes          int
	SuggestedAction string
	At              time.Time
}
