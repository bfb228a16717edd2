package pipeline

import (
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// Status is where an item stands as a whole.
type Status uint8

const (
	// StatusNew: the item has not been started (the zero State).
	StatusNew Status = iota
	// StatusActive: a worker holds the item's current stage.
	StatusActive
	// StatusMerging: the quality gate passed; the squash merge is pending.
	// DONE is set only after the merge landed, so that a crash between
	// the merge and DONE is recoverable.
	StatusMerging
	// StatusDone: merged and finished. Terminal.
	StatusDone
	// StatusPaused: waiting for a person; an escalation was raised.
	StatusPaused
	numStatuses
)

var statusNames = [numStatuses]string{"NEW", "ACTIVE", "MERGING", "DONE", "PAUSED"}

func (s Status) String() string {
	if s < numStatuses {
		return statusNames[s]
	}
	return fmt.Sprintf("Status(%d)", uint8(s))
}

// MarshalText makes the persisted state readable.
func (s Status) MarshalText() ([]byte, error) {
	if s >= numStatuses {
		return nil, fmt.Errorf("pipeline: invalid status %d", uint8(s))
	}
	return []byte(statusNames[s]), nil
}

// UnmarshalText reads what MarshalText wrote.
func (s *Status) UnmarshalText(b []byte) error {
	for i, n := range statusNames {
		if n == string(b) {
			*s = Status(i)
			return nil
		}
	}
	return fmt.Errorf("pipeline: unknown status %q", b)
}

// StageRecord is what happened at one stage of an item: its start and end
// times, its result line and its counter of failures.
type StageRecord struct {
	Start time.Time `json:"start,omitzero"`
	End   time.Time `json:"end,omitzero"`
	// Result is the stage's line in the report ("3 tasks, 4/4", "GO, 8",
	// "PASS 92/100", "ERROR: ...").
	Result string `json:"result,omitempty"`
	// Failures counts the outcomes at this stage that sent the item round
	// again: NO-GO verdicts at Stage 1 (validation_retries), FAIL verdicts at
	// Stage 3 (quality_cycles).
	Failures int `json:"failures,omitempty"`
}

// Finished is an assignment that ended with a processed report; a repeat of
// that report from it is a duplicate, anything else from it is stale.
type Finished struct {
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	Stage      int                  `json:"stage"`
}

// State is one item's whole coordinator state. It is a value: Step never
// modifies the State it is given (its slices are copied before they change).
type State struct {
	Item   foreman.ItemID `json:"item"`
	Title  string         `json:"title,omitempty"`
	Status Status         `json:"status"`
	// Stage is the current stage (the last one, once DONE or PAUSED).
	Stage int `json:"stage"`
	// Worker and Assignment hold the current stage (the item's worker map);
	// they fence every worker message.
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Last is the assignment whose report moved the item last.
	Last Finished `json:"last,omitzero"`
	// Assignments counts the assignments issued; the next id derives from it.
	Assignments int `json:"assignments"`
	// Steps counts applied transitions; effect keys derive from it.
	Steps  int64         `json:"steps"`
	Stages []StageRecord `json:"stages"`
	// Readiness is Stage 1's readiness score, kept for Stage 3's fast-track
	// decision (readiness_scores[id]).
	Readiness string `json:"readiness,omitempty"`
	// Feedback is what the next worker is told about the previous round
	// (a NO-GO reason, the quality gate's issues).
	Feedback string `json:"feedback,omitempty"`
	// Crash is the crash-detection protocol's state (health.Step); its
	// Crashes counter (the crash count) survives resumes.
	Crash health.State `json:"crash"`
	// Unparsed counts unparseable messages from the current worker since
	// its last parseable one: the first is probed, the second pauses.
	Unparsed int `json:"unparsed,omitempty"`
	// Worktree is set while the item's worktree should exist.
	Worktree bool `json:"worktree,omitempty"`
	// Commit is the squash commit once merged.
	Commit string `json:"commit,omitempty"`
	// Pause says why the item is PAUSED.
	Pause *Escalation `json:"pause,omitempty"`
	// Stale and Duplicates count the messages the guards refused.
	Stale      int       `json:"stale,omitempty"`
	Duplicates int       `json:"duplicates,omitempty"`
	Started    time.Time `json:"started,omitzero"`
	Updated    time.Time `json:"updated,omitzero"`
}

// stage returns the record of stage i, or a zero one.
func (s State) stage(i int) StageRecord {
	if i >= 0 && i < len(s.Stages) {
		return s.Stages[i]
	}
	return StageRecord{}
}

// EventKind is what happened to an item.
type EventKind uint8

const (
	// EventStart starts a new item at its flow's first stage.
	EventStart EventKind = iota + 1
	// EventReport is a worker's stage report (COMPLETE or ERROR line).
	EventReport
	// EventStatusReply is a worker's parseable answer to a status probe.
	EventStatusReply
	// EventIdle: the worker went idle (or silent) without a report
	// (idle with no completion message before it).
	EventIdle
	// EventProbeTimeout: the probe went unanswered for the probe timeout.
	EventProbeTimeout
	// EventUnparseable: a message from the worker did not parse; Detail
	// holds the raw text.
	EventUnparseable
	// EventMerged: the squash merge landed (or had landed before); Commit.
	EventMerged
	// EventMergeConflict: the merge needs a person; Files conflict.
	EventMergeConflict
	// EventMergeFailed: the merge was refused for a reason a person must
	// look at (nothing to merge, dirty worktree, failed check); Detail.
	EventMergeFailed
	// EventResolve: a person resolved a PAUSED item; it restarts at Stage.
	EventResolve
	// EventLandRejected: a Lander refused a MERGING item's change with
	// feedback (a failing check's name and log tail, a review requesting
	// changes) in Detail: the flow applies the rule of the stage the item
	// merged from for Outcome (the story flow's quality FAIL: a rework at
	// the build stage within its quality cycles, Detail as its feedback;
	// past the cycles, a pause).
	EventLandRejected
	numEventKinds
)

var eventNames = [numEventKinds]string{"", "Start", "Report", "StatusReply", "Idle", "ProbeTimeout",
	"Unparseable", "Merged", "MergeConflict", "MergeFailed", "Resolve", "LandRejected"}

func (k EventKind) String() string {
	if k > 0 && k < numEventKinds {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Outcome is the verdict or result a stage report carries.
type Outcome string

// The outcomes of StoryFlow's reports.
const (
	Complete Outcome = "COMPLETE"
	Error    Outcome = "ERROR"
	Go       Outcome = "GO"
	NoGo     Outcome = "NO-GO"
	Pass     Outcome = "PASS"
	Concerns Outcome = "CONCERNS"
	Waived   Outcome = "WAIVED"
	Fail     Outcome = "FAIL"
)

// Event is one input to Step. Worker and Assignment say who sent a worker
// message; both are checked against the item's current assignment before
// anything else. A worker event must carry its assignment id: one without it
// is stale (ignored and counted in State.Stale) whenever the item has a
// current assignment, because worker names are reused (story-{id}-s3 runs
// again after a quality-gate rework) and a name alone cannot tell a late
// report of an earlier worker from the current one's.
type Event struct {
	Kind       EventKind
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	// Stage and Outcome are a report's; Stage is also EventResolve's target.
	Stage   int
	Outcome Outcome
	// Tasks, Score and Detail are the report's fields: tasks created, the
	// plan/readiness/quality score, and the details, reason or issues
	// (the raw text for EventUnparseable, the error for EventMergeFailed).
	Tasks  int
	Score  string
	Detail string
	// Board is the board as re-read for this report (see Flow.NeedsBoard);
	// nil when it was not read.
	Board *BoardStory
	// Title names the item for EventStart (the squash commit's subject).
	Title string
	// Files are EventMergeConflict's conflicting files; Commit is
	// EventMerged's squash commit.
	Files  []string
	Commit string
}
