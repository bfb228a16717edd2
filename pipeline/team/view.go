package team

import (
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The status view. The team keeps every story's status in memory,
// derived from the records a story's status is made of (its task in the
// graph, its pipeline record, a person's decision, its memory's worker
// cause, conflict triage's counts, its usage, its refusals), and updated by the writes
// of those records: the team's store is wrapped (viewStore), and every
// Apply that writes one of them also writes, in the same Apply, the view
// record of each story whose status it changes (kindView, the story's
// StoryStatus) and the view's summary (kindViewSum). So:
//
//   - Status costs the stories it shows and no store read per story;
//   - ReadStatus, in another process, reads one List of view records and
//     the summary, which are always those of the store's current state
//     (they are written in the writes that change it);
//   - an event costs the stories it changes (a pause also changes the
//     stories it blocks), not the size of the plan.
//
// A writer in another process (a person's Resolve from another terminal)
// writes the same way, through its own view; its write changes the
// summary's version, which the next Status here notices: the view is then
// read again from the store.

// Store kinds of the view.
const (
	kindView    = "team.view"    // viewRecord, by story id
	kindViewSum = "team.viewsum" // viewSummary, id viewSumID
	viewSumID   = "summary"
)

// viewSummary is the view's summary record.
type viewSummary struct {
	Stories int                `json:"stories"`
	ByState map[StoryState]int `json:"byState"`
	Tokens  int64              `json:"tokens"`
	CostUSD float64            `json:"costUSD"`
	Refused int64              `json:"refused,omitempty"`
}

// storyInputs is what a story's status is derived from.
type storyInputs struct {
	Story  Story
	Task   taskgraph.Status
	State  viewState
	Dec    *decision
	Cause  string
	Triage *triageRecord
	Usage  usageRecord
	// Refused is nil for a story with no refusals record: a view entry
	// stays in its size class.
	Refused *refusedRecord
}

// refused is how many of the story's attempts were refused.
func (in *storyInputs) refused() int64 {
	if in.Refused == nil {
		return 0
	}
	return in.Refused.Count
}

// viewState is what a story's status takes from its pipeline record
// (pipeline.State): the view keeps this, not the whole record (its stages,
// the crash protocol's state, ...), so that it holds about 600 bytes less
// per story. Last and Since are what the status shows of the stages.
type viewState struct {
	Status      pipeline.Status
	Stage       int
	Worker      foreman.WorkerID
	Assignment  foreman.AssignmentID
	Assignments int
	// Last is lastResult of the record; Since the current stage's start
	// (zero when the record has no such stage).
	Last     string
	Since    time.Time
	Feedback string
	Commit   string
	Pause    *pipeline.Escalation
	Started  time.Time
	Updated  time.Time
}

// viewStateOf is what the view keeps of a pipeline record.
func viewStateOf(st pipeline.State) viewState {
	v := viewState{Status: st.Status, Stage: st.Stage, Worker: st.Worker, Assignment: st.Assignment,
		Assignments: st.Assignments, Last: lastResult(st), Feedback: st.Feedback, Commit: st.Commit, Pause: st.Pause,
		Started: st.Started, Updated: st.Updated}
	if st.Stage < len(st.Stages) {
		v.Since = st.Stages[st.Stage].Start
	}
	return v
}

// viewEntry is one story in the view: its inputs with their records'
// versions, its status before blocking (base) and after (ss).
type viewEntry struct {
	in   storyInputs
	base StoryState
	ss   StoryStatus
	// viewVer is the version of its view record; order its place in the
	// plan (creation order).
	viewVer int64
	order   int
}

// viewRecord is a story's view record.
type viewRecord struct {
	Order  int         `json:"order"`
	Status StoryStatus `json:"status"`
}

// statusView is the team's view of every story.
type statusView struct {
	t *Team
	// inner is the store under the team's viewStore.
	inner store.Store
	// wmu serializes the writes that change the view (viewStore.Apply)
	// and its rebuilds; mu guards the fields below for readers.
	wmu sync.Mutex
	mu  sync.Mutex

	entries    map[foreman.ItemID]*viewEntry
	order      []foreman.ItemID
	dependents map[foreman.ItemID][]foreman.ItemID
	sum        viewSummary
	sumVer     int64
	// rev counts the changes to the view.
	rev uint64
}

func newStatusView(t *Team) *statusView {
	return &statusView{t: t, entries: map[foreman.ItemID]*viewEntry{}, dependents: map[foreman.ItemID][]foreman.ItemID{},
		sum: viewSummary{ByState: map[StoryState]int{}}}
}

// derive is a story's status from its inputs, before blocking (State is
// the base state) and without Retrying (this process's, added when read).
func (t *Team) derive(in storyInputs) StoryStatus {
	st, s := in.State, in.Story
	ss := StoryStatus{ID: s.ID, Title: s.Title, After: s.After,
		State: storyState(taskgraph.Task{Status: in.Task}, pipeline.State{Status: st.Status}, in.Dec),
		Stage: st.Stage, Attempts: st.Assignments, Last: st.Last, Feedback: st.Feedback, Commit: st.Commit,
		Started: st.Started, Updated: st.Updated, Tokens: in.Usage.Tokens, CostUSD: in.Usage.CostUSD,
	}
	if r := in.Refused; r != nil {
		ss.Refused, ss.RefusedLast, ss.RefusedKinds = r.Count, r.Last, r.kinds()
	}
	if st.Status != pipeline.StatusNew {
		ss.Role = t.role(st.Stage)
	}
	if in.Dec != nil {
		ss.Decision = in.Dec.Action
	}
	if ss.State == StoryRunning {
		ss.Worker, ss.Assignment, ss.Since = st.Worker, st.Assignment, st.Since
	}
	if ss.State == StoryPaused {
		ss.Pause = teamAdvice(st.Pause)
		ss.WorkerCause = in.Cause
	}
	if (ss.State == StoryPaused || ss.State == StoryRunning) && in.Triage != nil {
		r := in.Triage
		ss.Triage = &ConflictTriage{Target: t.targetBranch(), Rebases: r.Rebases, Reworks: r.Reworks, Files: r.Files, Cause: r.Cause}
	}
	return ss
}

// blockedBy says whether a story whose base state is pending is blocked,
// and by which of the stories it comes after: those paused or abandoned,
// else those blocked themselves. base and final look the others up.
func blockedBy(after []foreman.ItemID, base, final func(foreman.ItemID) StoryState) []foreman.ItemID {
	var by []foreman.ItemID
	for _, a := range after {
		switch base(a) {
		case StoryPaused, StoryAbandoned:
			by = append(by, a)
		}
	}
	if len(by) > 0 {
		return by
	}
	for _, a := range after {
		if final(a) == StoryBlocked {
			by = append(by, a)
		}
	}
	return by
}

// storyOfTask is the story a task of the team's graph stands for (Add
// makes the task from the story: taskSpec).
func storyOfTask(task taskgraph.Task) Story {
	s := Story{ID: foreman.ItemID(task.Subject), Title: task.Description}
	for _, b := range task.BlockedBy {
		s.After = append(s.After, foreman.ItemID(b))
	}
	return s
}
