package pipeline

import (
	"fmt"
	"strconv"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// EffectKind is something Step asks the runtime to do.
type EffectKind uint8

const (
	// EffectAck sends "ACK Stage {N} for {id}" to Worker. A second ACK is
	// harmless.
	EffectAck EffectKind = iota + 1
	// EffectShutdown asks Worker to shut down (a shutdown request).
	EffectShutdown
	// EffectSpawn starts a fresh worker, named Worker, on Assignment at
	// Stage. Idempotent by Assignment.
	EffectSpawn
	// EffectProbe sends the status check to Worker.
	EffectProbe
	// EffectCreateWorktree makes the item's worktree (idempotent).
	EffectCreateWorktree
	// EffectRemoveWorktree removes it; a missing worktree is success.
	EffectRemoveWorktree
	// EffectMerge squash-merges the item; its result comes back to Step as
	// EventMerged, EventMergeConflict or EventMergeFailed. Idempotent by the
	// commit trailer.
	EffectMerge
	// EffectEscalate hands Escalation to a person.
	EffectEscalate
	// EffectUpdateBoard sets the item's board status to Status.
	EffectUpdateBoard
	// EffectAppendReport appends the item's section to the run report.
	EffectAppendReport
	numEffectKinds
)

var effectNames = [numEffectKinds]string{"", "ack", "shutdown", "spawn", "probe", "create-worktree",
	"remove-worktree", "merge", "escalate", "update-board", "append-report"}

func (k EffectKind) String() string {
	if k > 0 && k < numEffectKinds {
		return effectNames[k]
	}
	return fmt.Sprintf("EffectKind(%d)", uint8(k))
}

// MarshalText makes persisted effects readable.
func (k EffectKind) MarshalText() ([]byte, error) {
	if k == 0 || k >= numEffectKinds {
		return nil, fmt.Errorf("pipeline: invalid effect kind %d", uint8(k))
	}
	return []byte(effectNames[k]), nil
}

// UnmarshalText reads what MarshalText wrote.
func (k *EffectKind) UnmarshalText(b []byte) error {
	for i := 1; i < int(numEffectKinds); i++ {
		if effectNames[i] == string(b) {
			*k = EffectKind(i)
			return nil
		}
	}
	return fmt.Errorf("pipeline: unknown effect kind %q", b)
}

// Effect is one thing to do, with everything needed to do it again after a
// restart. Effects are persisted with the state that produced them before
// any of them runs.
type Effect struct {
	Kind EffectKind `json:"kind"`
	// Resume is set on a Spawn whose worker replaces a crashed one (resume
	// its session or add the CHECKPOINT RESUME block).
	Resume bool `json:"resume,omitempty"`
	// Index is the effect's place among the effects of the transition
	// (State.Steps) Step that produced it.
	Index int32          `json:"index"`
	Step  int64          `json:"step"`
	Item  foreman.ItemID `json:"item"`
	Stage int            `json:"stage"`
	// Worker is the recipient (Ack, Shutdown, Probe) or the new worker
	// (Spawn); Assignment is the one it concerns.
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Readiness and Feedback are a Spawn's prompt inputs.
	Readiness string `json:"readiness,omitempty"`
	Feedback  string `json:"feedback,omitempty"`
	// Title is the Merge's commit subject.
	Title string `json:"title,omitempty"`
	// BoardStatus is UpdateBoard's new status.
	BoardStatus string `json:"boardStatus,omitempty"`
	// Escalation is Escalate's content.
	Escalation *Escalation `json:"escalation,omitempty"`
}

// Key is the effect's idempotency key: the assignment id for a Spawn, the
// item for a Merge (the trailer), and otherwise the item, the transition and
// the effect's place in it.
func (e Effect) Key() string {
	switch e.Kind {
	case EffectSpawn:
		return "spawn/" + string(e.Assignment)
	case EffectMerge:
		return "merge/" + string(e.Item)
	}
	return string(e.Item) + "/" + strconv.FormatInt(e.Step, 10) + "/" + strconv.Itoa(int(e.Index)) + "/" + e.Kind.String()
}

// AckText is the ACK line for a report of stage on item.
func AckText(item foreman.ItemID, stage int) string {
	return "ACK Stage " + strconv.Itoa(stage) + " for " + string(item)
}

// Text is the message an Ack or Probe effect sends.
func (e Effect) Text() string {
	switch e.Kind {
	case EffectAck:
		return AckText(e.Item, e.Stage)
	case EffectProbe:
		return health.ProbeText(e.Item, e.Stage)
	}
	return ""
}

// PauseReason says why an item was paused.
type PauseReason string

// The reasons for a pause.
const (
	// ReasonStageError: the worker reported an ERROR.
	ReasonStageError PauseReason = "STAGE_ERROR"
	// ReasonRetriesExhausted: a stage failed more often than its limit
	// allows (NO-GO after the validation retry, FAIL after the quality cycles).
	ReasonRetriesExhausted PauseReason = "RETRIES_EXHAUSTED"
	// ReasonBoardCheck: the board does not show what the report claims.
	ReasonBoardCheck PauseReason = "BOARD_CHECK"
	// ReasonCrashed: the worker crashed more often than the crash budget.
	ReasonCrashed PauseReason = "CRASHED"
	// ReasonUnparseable: the worker's messages did not parse, before and
	// after a status probe.
	ReasonUnparseable PauseReason = "UNPARSEABLE"
	// ReasonMergeConflict: the squash merge conflicts; Files name them and
	// the worktree is kept for the person resolving it.
	ReasonMergeConflict PauseReason = "MERGE_CONFLICT"
	// ReasonMergeFailed: the merge was refused (nothing to merge, dirty
	// worktree, failed check).
	ReasonMergeFailed PauseReason = "MERGE_FAILED"
)

// Escalation asks a person to act on a paused item: what happened, where,
// the counters that led there and what to do (invariant 9).
type Escalation struct {
	// Key is the escalating effect's key: an escalation re-issued after a
	// restart carries the same one, so a receiver can drop the repeat.
	Key    string         `json:"key"`
	Item   foreman.ItemID `json:"item"`
	Stage  int            `json:"stage"`
	Reason PauseReason    `json:"reason"`
	// Message is the escalation line ("Story {id} ...").
	Message         string               `json:"message"`
	Worker          foreman.WorkerID     `json:"worker,omitempty"`
	Assignment      foreman.AssignmentID `json:"assignment,omitempty"`
	Files           []string             `json:"files,omitempty"`
	Failures        int                  `json:"failures,omitempty"`
	Limit           int                  `json:"limit,omitempty"`
	Crashes         int                  `json:"crashes,omitempty"`
	SuggestedAction string               `json:"suggestedAction"`
	At              time.Time            `json:"at"`
}
