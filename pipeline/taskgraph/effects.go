package taskgraph

import (
	"fmt"
	"strconv"
	"strings"

	foreman "github.com/agentforeman/foreman"
)

// EffectKind is what the runtime is asked to do.
type EffectKind uint8

const (
	// EffectReport is output for the person driving the session.
	EffectReport EffectKind = iota
	// EffectSpawn starts a worker for Task under Assignment. Spawning is
	// keyed by the assignment: a repeat must be a no-op.
	EffectSpawn
	// EffectLog is an entry for the team's message log; LogType gives its type.
	EffectLog
	// EffectAck acknowledges a worker's callback again: the answer to a
	// duplicate.
	EffectAck
)

var effectKindNames = [...]string{"report", "spawn", "log", "ack"}

func (k EffectKind) String() string { return nameOf(effectKindNames[:], int(k), "EffectKind") }

// MarshalText writes the kind's name.
func (k EffectKind) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText reads a kind's name.
func (k *EffectKind) UnmarshalText(b []byte) error {
	i, err := indexOf(effectKindNames[:], string(b), "effect kind")
	*k = EffectKind(i)
	return err
}

// Note says which message an effect carries; Effect.Text renders it.
type Note uint8

// Every message the coordinator emits.
const (
	NoteNone Note = iota
	NoteSpawned
	NoteUnblocked
	NoteSpawnSummary
	NoteWaiting
	NotePipelineComplete
	NoteStalled
	NoteConfirmed
	NoteProgress
	NoteStillRunning
	NoteAllRunning
	NoteWorkerFailed
	NoteCancelled
	NoteOrphanReset
	NoteCheckpoint
	NotePaused
	NoteResumed
	NoteNoWorker
	NoteStale
	NoteDuplicate
	NoteStatus
	NoteViolations
	NoteTaskUpdated
	NoteParked
)

var noteNames = [...]string{"", "spawned", "task_unblocked", "spawn_summary", "waiting", "pipeline_complete",
	"stalled", "confirmed", "progress", "still_running", "all_running", "worker_failed", "cancelled",
	"orphan_reset", "checkpoint", "paused", "resumed", "no_worker", "stale", "duplicate", "status",
	"violations", "task_updated", "parked"}

func (n Note) String() string { return nameOf(noteNames[:], int(n), "Note") }

// MarshalText writes the note's name.
func (n Note) MarshalText() ([]byte, error) { return []byte(n.String()), nil }

// UnmarshalText reads a note's name.
func (n *Note) UnmarshalText(b []byte) error {
	i, err := indexOf(noteNames[:], string(b), "note")
	*n = Note(i)
	return err
}

func nameOf(names []string, i int, typ string) string {
	if i >= 0 && i < len(names) {
		return names[i]
	}
	return fmt.Sprintf("%s(%d)", typ, i)
}

func indexOf(names []string, name, what string) (int, error) {
	for i, n := range names {
		if n == name {
			return i, nil
		}
	}
	return 0, fmt.Errorf("taskgraph: unknown %s %q", what, name)
}

// Effect is one thing the core asks the runtime to do. Effects are
// recorded in the session before they are carried out (Session.Pending)
// and re-issued after a restart, so every executor must tolerate a repeat:
// Key identifies an effect for that purpose. Effects are small values;
// the rare bulky parts live in Details.
type Effect struct {
	Kind EffectKind `json:"kind"`
	Note Note       `json:"note,omitempty"`
	// Status is the task's status the message is about.
	Status Status `json:"status,omitempty"`
	// Seq numbers the effect within its session.
	Seq        int64                `json:"seq"`
	Task       string               `json:"task,omitempty"`
	Role       string               `json:"role,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Tasks lists subjects (spawned, waiting for); Count and Total are the
	// numbers a message reports.
	Tasks   []string `json:"tasks,omitempty"`
	Count   int      `json:"count,omitempty"`
	Total   int      `json:"total,omitempty"`
	Details *Details `json:"details,omitempty"`
}

// Details are the rarer parts of an effect.
type Details struct {
	// Blocked and Missing explain a stall.
	Blocked []BlockedTask `json:"blocked,omitempty"`
	Missing []string      `json:"missing,omitempty"`
	// Text is free text: a checkpoint message, validation details.
	Text string `json:"text,omitempty"`
	// Report is the status report of a "check".
	Report *StatusReport `json:"report,omitempty"`
	// Ready lists the ready tasks a spawn-next left pending because
	// MaxActive tasks are in progress: the first MaxHeldListed of them in
	// creation order; More counts the others.
	Ready     []string `json:"ready,omitempty"`
	More      int      `json:"more,omitempty"`
	MaxActive int      `json:"max_active,omitempty"`
}

func (e Effect) details() Details {
	if e.Details == nil {
		return Details{}
	}
	return *e.Details
}

// LogType is the team log's message type of an EffectLog:
// "task_unblocked" for a spawn, "error" for a worker failure, "stale" for
// a fenced-off message, "task_<status>" for a task update.
func (e Effect) LogType() string {
	switch e.Note {
	case NoteUnblocked:
		return "task_unblocked"
	case NoteWorkerFailed:
		return "error"
	case NoteStale:
		return "stale"
	case NoteTaskUpdated:
		return "task_" + e.Status.String()
	}
	return e.Note.String()
}

// Key identifies the effect for idempotency: a spawn by task and
// assignment, anything else by its sequence number in the session.
func (e Effect) Key() string {
	if e.Kind == EffectSpawn {
		return "spawn/" + e.Task + "/" + string(e.Assignment)
	}
	return e.Kind.String() + "/" + strconv.FormatInt(e.Seq, 10)
}

const tag = "[coordinator] "

// Text renders the effect as the coordinator's output lines.
func (e Effect) Text() string {
	if e.Kind == EffectSpawn {
		return fmt.Sprintf("%sSpawn %s worker for %s (assignment %s)", tag, e.Role, e.Task, e.Assignment)
	}
	switch e.Note {
	case NoteUnblocked:
		return fmt.Sprintf("%sSpawning: %s → %s", tag, e.Task, e.Role)
	case NoteSpawned:
		return fmt.Sprintf("%s> Spawned: %s → %s (assignment %s)", tag, e.Role, e.Task, e.Assignment)
	case NoteSpawnSummary:
		return fmt.Sprintf("%s%d agent(s) spawned. Pipeline: %d/%d completed\n%s%sType 'check' to see status, 'resume' to advance after completion.", tag, len(e.Tasks), e.Count, e.Total, e.heldText(), tag)
	case NoteWaiting:
		return fmt.Sprintf("%sWaiting for: %s\n%s%sUse 'check' to monitor or 'resume' after completion.", tag, strings.Join(e.Tasks, ", "), e.heldText(), tag)
	case NotePipelineComplete:
		return fmt.Sprintf("%sPIPELINE_COMPLETE: all pipeline tasks completed (%d/%d)", tag, e.Count, e.Total)
	case NoteStalled:
		d := e.details()
		var b strings.Builder
		fmt.Fprintf(&b, "%sPipeline stalled: nothing ready, nothing running, not complete (%d/%d completed)", tag, e.Count, e.Total)
		for _, bt := range d.Blocked {
			fmt.Fprintf(&b, "\n%s  %s", tag, bt)
		}
		if len(d.Missing) > 0 {
			fmt.Fprintf(&b, "\n%s  missing tasks: %s", tag, strings.Join(d.Missing, ", "))
		}
		for _, bt := range d.Blocked {
			if bt.Status == Parked {
				fmt.Fprintf(&b, "\n%s%s is parked: a person releases it (task update to pending), completes or cancels it.", tag, bt.Task)
			}
		}
		fmt.Fprintf(&b, "\n%s'resume' retries failed tasks; otherwise a person must create the missing tasks or re-create the blocked ones.", tag)
		return b.String()
	case NoteConfirmed:
		return fmt.Sprintf("%sdone %s confirmed complete (%s)", tag, e.Task, e.Role)
	case NoteProgress:
		return fmt.Sprintf("%s%s progress update from %s\n%sWaiting for task completion...", tag, e.Task, e.Role, tag)
	case NoteStillRunning:
		return fmt.Sprintf("%s... %s still running (%s)", tag, e.Task, e.Role)
	case NoteAllRunning:
		return fmt.Sprintf("%s%d worker(s) still executing.\n%sUse 'check' to monitor or 'resume' again later.", tag, e.Count, tag)
	case NoteWorkerFailed:
		return fmt.Sprintf("%sWorker failure: %s (%s), task status %s\n%sTask %s reset to pending. Will retry on next 'resume'.", tag, e.Task, e.Role, e.Status, tag, e.Task)
	case NoteCancelled:
		return fmt.Sprintf("%s%s was cancelled; its worker (%s) is released", tag, e.Task, e.Role)
	case NoteParked:
		return fmt.Sprintf("%s%s is parked, waiting for a person; its worker (%s) is released", tag, e.Task, e.Role)
	case NoteOrphanReset:
		return fmt.Sprintf("%s%s was in progress with no active worker; reset to pending", tag, e.Task)
	case NoteCheckpoint:
		msg := e.details().Text
		if msg == "" {
			msg = "SPEC PHASE COMPLETE"
		}
		return fmt.Sprintf("%s==========================================\n%s%s — CHECKPOINT (%s)\n%s==========================================\n%sReview the artifacts in the session folder.\n%s'resume' to proceed to the next phase.", tag, tag, msg, e.Task, tag, tag, tag)
	case NotePaused:
		return fmt.Sprintf("%sPaused at checkpoint %s: nothing is spawned until 'resume'.", tag, e.Task)
	case NoteResumed:
		return fmt.Sprintf("%sCheckpoint %s released; resuming.", tag, e.Task)
	case NoteNoWorker:
		return fmt.Sprintf("%sInfo: message from [%s] (no active task tracked)", tag, e.Role)
	case NoteStale:
		return fmt.Sprintf("%sIgnored stale message from [%s] for %s (assignment %q is not current)", tag, e.Role, e.Task, e.Assignment)
	case NoteDuplicate:
		return fmt.Sprintf("%s%s already processed (duplicate from [%s], assignment %s)", tag, e.Task, e.Role, e.Assignment)
	case NoteStatus:
		if r := e.details().Report; r != nil {
			return r.Text()
		}
	case NoteViolations:
		return fmt.Sprintf("%sValidation: %s", tag, e.details().Text)
	case NoteTaskUpdated:
		return fmt.Sprintf("%s%s is now %s", tag, e.Task, e.Status)
	}
	return fmt.Sprintf("%s%s %s %s", tag, e.Kind, e.Note, e.Task)
}

// heldText is the line naming the ready tasks MaxActive held back, or "".
func (e Effect) heldText() string {
	d := e.details()
	if len(d.Ready) == 0 {
		return ""
	}
	more := ""
	if d.More > 0 {
		more = fmt.Sprintf(" and %d more", d.More)
	}
	return fmt.Sprintf("%sReady to spawn: %s%s (at most %d active at once)\n", tag, strings.Join(d.Ready, ", "), more, d.MaxActive)
}
