package taskgraph

import (
	"fmt"
	"strconv"
	"strings"

	foreman "github.com/agentforeman/foreman"
)

// EffectKind is what the runtime is asked to do.
type EffectKind string

const (
	// EffectSpawn starts a worker for Task under Assignment. Spawning is
	// keyed by the assignment: a repeat must be a no-op.
	EffectSpawn EffectKind = "spawn"
	// EffectReport is output for the person driving the session.
	EffectReport EffectKind = "report"
	// EffectLog is an entry for the team's message log (the seed's
	// team_msg), with LogType "task_unblocked", "error", ...
	EffectLog EffectKind = "log"
	// EffectAck acknowledges a worker's callback again: the answer to a
	// duplicate.
	EffectAck EffectKind = "ack"
)

// Note says which message an effect carries; Effect.Text renders it.
type Note string

// Every message the coordinator emits.
const (
	NoteSpawned          Note = "spawned"
	NoteUnblocked        Note = "task_unblocked"
	NoteSpawnSummary     Note = "spawn_summary"
	NoteWaiting          Note = "waiting"
	NotePipelineComplete Note = "pipeline_complete"
	NoteStalled          Note = "stalled"
	NoteConfirmed        Note = "confirmed"
	NoteProgress         Note = "progress"
	NoteStillRunning     Note = "still_running"
	NoteAllRunning       Note = "all_running"
	NoteWorkerFailed     Note = "worker_failed"
	NoteCancelled        Note = "cancelled"
	NoteOrphanReset      Note = "orphan_reset"
	NoteCheckpoint       Note = "checkpoint"
	NotePaused           Note = "paused"
	NoteResumed          Note = "resumed"
	NoteNoWorker         Note = "no_worker"
	NoteStale            Note = "stale"
	NoteDuplicate        Note = "duplicate"
	NoteStatus           Note = "status"
	NoteViolations       Note = "violations"
	NoteTaskUpdated      Note = "task_updated"
)

// Effect is one thing the core asks the runtime to do. Effects are
// recorded in the session before they are carried out (Session.Pending)
// and re-issued after a restart, so every executor must tolerate a repeat:
// Key identifies an effect for that purpose.
type Effect struct {
	Kind EffectKind `json:"kind"`
	Note Note       `json:"note,omitempty"`
	// Seq numbers the effect within its session.
	Seq        int64                `json:"seq"`
	Task       string               `json:"task,omitempty"`
	Role       string               `json:"role,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Description is the task's description (spawns).
	Description string `json:"description,omitempty"`
	// LogType is the team log's message type (logs).
	LogType string `json:"log_type,omitempty"`
	// Status is the task's status the message is about.
	Status Status `json:"status,omitempty"`
	// Tasks lists subjects (waiting for, ...); Count and Total are the
	// numbers a message reports.
	Tasks   []string      `json:"tasks,omitempty"`
	Count   int           `json:"count,omitempty"`
	Total   int           `json:"total,omitempty"`
	Blocked []BlockedTask `json:"blocked,omitempty"`
	Missing []string      `json:"missing,omitempty"`
	// Detail is free text: a checkpoint message, validation details.
	Detail string `json:"detail,omitempty"`
	// Report is the status report of a "check".
	Report *StatusReport `json:"report,omitempty"`
}

// Key identifies the effect for idempotency: a spawn by task and
// assignment, anything else by its sequence number in the session.
func (e Effect) Key() string {
	if e.Kind == EffectSpawn {
		return "spawn/" + e.Task + "/" + string(e.Assignment)
	}
	return string(e.Kind) + "/" + strconv.FormatInt(e.Seq, 10)
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
		return fmt.Sprintf("%s%d agent(s) spawned. Pipeline: %d/%d completed\n%sType 'check' to see status, 'resume' to advance after completion.", tag, len(e.Tasks), e.Count, e.Total, tag)
	case NoteWaiting:
		return fmt.Sprintf("%sWaiting for: %s\n%sUse 'check' to monitor or 'resume' after completion.", tag, strings.Join(e.Tasks, ", "), tag)
	case NotePipelineComplete:
		return fmt.Sprintf("%sPIPELINE_COMPLETE: all pipeline tasks completed (%d/%d)", tag, e.Count, e.Total)
	case NoteStalled:
		var b strings.Builder
		fmt.Fprintf(&b, "%sPipeline stalled: nothing ready, nothing running, not complete (%d/%d completed)", tag, e.Count, e.Total)
		for _, bt := range e.Blocked {
			fmt.Fprintf(&b, "\n%s  %s", tag, bt)
		}
		if len(e.Missing) > 0 {
			fmt.Fprintf(&b, "\n%s  missing tasks: %s", tag, strings.Join(e.Missing, ", "))
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
	case NoteOrphanReset:
		return fmt.Sprintf("%s%s was in progress with no active worker; reset to pending", tag, e.Task)
	case NoteCheckpoint:
		msg := e.Detail
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
		if e.Report != nil {
			return e.Report.Text()
		}
	case NoteViolations:
		return fmt.Sprintf("%sValidation: %s", tag, e.Detail)
	case NoteTaskUpdated:
		return fmt.Sprintf("%s%s is now %s", tag, e.Task, e.Status)
	}
	return fmt.Sprintf("%s%s %s %s", tag, e.Kind, e.Note, e.Task)
}
