package taskgraph

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	foreman "github.com/agentforeman/foreman"
)

// SessionStatus is where a whole session stands.
type SessionStatus string

const (
	// SessionActive: the pipeline advances on every wake-up.
	SessionActive SessionStatus = "active"
	// SessionPaused: a checkpoint task completed; nothing new is spawned
	// until a person says "resume".
	SessionPaused SessionStatus = "paused"
	// SessionCompleted: PIPELINE_COMPLETE was detected.
	SessionCompleted SessionStatus = "completed"
)

// ActiveWorker is an entry of the session's active_workers: a worker
// spawned for a task and not yet processed by the coordinator.
type ActiveWorker struct {
	Task       string               `json:"task_subject"`
	Role       string               `json:"role"`
	Assignment foreman.AssignmentID `json:"assignment"`
	SpawnedAt  time.Time            `json:"spawned_at"`
}

// Counters count the callbacks and updates fenced off (invariant 3).
type Counters struct {
	// Stale: from an assignment that is not current; ignored.
	Stale int64 `json:"stale"`
	// Duplicate: a repeat of a completion already processed; acknowledged
	// again, not reprocessed.
	Duplicate int64 `json:"duplicate"`
}

// Session is the coordinator's whole state, the team's session file
// (team-session.json) plus its task list, kept as one document so that a
// transition is one atomic write. Treat a *Session as immutable: Core returns
// a new one.
type Session struct {
	ID        string
	Team      string
	Mode      Mode
	Scope     string
	Status    SessionStatus
	CreatedAt time.Time
	// CompletedAt is set when PIPELINE_COMPLETE is detected.
	CompletedAt time.Time
	// Checkpoint names the checkpoint task the session is paused at.
	Checkpoint    string
	Graph         *Graph
	ActiveWorkers []ActiveWorker
	Counters      Counters
	// Seq numbers assignments and EffectSeq effects, so ids never repeat
	// within a session, across restarts included.
	Seq       int64
	EffectSeq int64
	// Pending holds the effects decided but not yet confirmed executed;
	// the runtime re-issues them after a restart.
	Pending []Effect
}

// sessionJSON is the stored form: the session file's fields first, in
// its names.
type sessionJSON struct {
	ID             string         `json:"session_id"`
	Team           string         `json:"team_name,omitempty"`
	Mode           Mode           `json:"mode"`
	Scope          string         `json:"scope,omitempty"`
	Status         SessionStatus  `json:"status"`
	CreatedAt      time.Time      `json:"created_at"`
	CompletedAt    *time.Time     `json:"completed_at,omitempty"`
	Checkpoint     string         `json:"checkpoint,omitempty"`
	TasksTotal     int            `json:"tasks_total"`
	TasksCompleted int            `json:"tasks_completed"`
	ActiveWorkers  []ActiveWorker `json:"active_workers"`
	Tasks          []Task         `json:"tasks"`
	Counters       Counters       `json:"counters"`
	Seq            int64          `json:"seq"`
	EffectSeq      int64          `json:"effect_seq"`
	Pending        []Effect       `json:"pending_effects,omitempty"`
}

// MarshalJSON writes the stored form.
func (s *Session) MarshalJSON() ([]byte, error) {
	w := sessionJSON{
		ID: s.ID, Team: s.Team, Mode: s.Mode, Scope: s.Scope, Status: s.Status,
		CreatedAt: s.CreatedAt, Checkpoint: s.Checkpoint,
		ActiveWorkers: s.ActiveWorkers, Counters: s.Counters,
		Seq: s.Seq, EffectSeq: s.EffectSeq, Pending: s.Pending,
	}
	if !s.CompletedAt.IsZero() {
		t := s.CompletedAt
		w.CompletedAt = &t
	}
	if w.ActiveWorkers == nil {
		w.ActiveWorkers = []ActiveWorker{}
	}
	if s.Graph != nil {
		w.Tasks = make([]Task, s.Graph.Len())
		for i := range w.Tasks {
			w.Tasks[i] = s.Graph.task(i)
		}
		w.TasksTotal = s.Graph.Len()
		w.TasksCompleted = s.Graph.Count(Completed)
	}
	if w.Tasks == nil {
		w.Tasks = []Task{}
	}
	return json.Marshal(w)
}

// ErrCorruptSession is matched by every *CorruptSessionError.
var ErrCorruptSession = errors.New("taskgraph: corrupt session")

// CorruptSessionError is a stored session that cannot be read or is not a
// valid graph. The stored record is left as it is (invariant 8).
type CorruptSessionError struct {
	ID  string
	Err error
}

func (e *CorruptSessionError) Error() string {
	return fmt.Sprintf("taskgraph: session %q is corrupt (kept as is; repair or re-create it): %v", e.ID, e.Err)
}

// Unwrap returns the cause.
func (e *CorruptSessionError) Unwrap() error { return e.Err }

// Is makes errors.Is(err, ErrCorruptSession) true.
func (e *CorruptSessionError) Is(target error) bool { return target == ErrCorruptSession }

// UnmarshalJSON reads the stored form and validates the graph (subjects,
// blockers, cycles; roles are checked by the Core that uses it).
func (s *Session) UnmarshalJSON(b []byte) error {
	var w sessionJSON
	if err := json.Unmarshal(b, &w); err != nil {
		return err
	}
	n, err := sessionFrom(w)
	if err != nil {
		return err
	}
	*s = *n
	return nil
}

// sessionFrom builds a session from its stored form.
func sessionFrom(w sessionJSON) (*Session, error) {
	switch w.Status {
	case SessionActive, SessionPaused, SessionCompleted:
	default:
		return nil, fmt.Errorf("unknown session status %q", w.Status)
	}
	g, err := buildGraph(nil, w.Tasks)
	if err != nil {
		return nil, err
	}
	s := &Session{
		ID: w.ID, Team: w.Team, Mode: w.Mode, Scope: w.Scope, Status: w.Status,
		CreatedAt: w.CreatedAt, Checkpoint: w.Checkpoint, Graph: g,
		ActiveWorkers: w.ActiveWorkers, Counters: w.Counters,
		Seq: w.Seq, EffectSeq: w.EffectSeq, Pending: w.Pending,
	}
	if w.CompletedAt != nil {
		s.CompletedAt = *w.CompletedAt
	}
	return s, nil
}

// DecodeSession reads a stored session; anything unreadable is a
// *CorruptSessionError.
func DecodeSession(id string, data []byte) (*Session, error) {
	var s Session
	if err := json.Unmarshal(data, &s); err != nil {
		return nil, &CorruptSessionError{ID: id, Err: err}
	}
	if s.ID != id {
		return nil, &CorruptSessionError{ID: id, Err: fmt.Errorf("record holds session %q", s.ID)}
	}
	return &s, nil
}

// clone copies what a transition may change; the graph is copied only
// when a status changes (see step.graph).
func (s *Session) clone() *Session {
	c := *s
	c.ActiveWorkers = slices.Clip(s.ActiveWorkers)
	c.Pending = slices.Clip(s.Pending)
	return &c
}

// copy returns a session that shares nothing a step changes in place
// with s.
func (s *Session) copy() *Session {
	c := *s
	c.ActiveWorkers = slices.Clone(s.ActiveWorkers)
	c.Pending = slices.Clone(s.Pending)
	c.Graph = s.Graph.clone()
	c.Graph.touched = nil
	return &c
}

// Progress returns how many tasks are completed and how many exist.
func (s *Session) Progress() (completed, total int) {
	return s.Graph.Count(Completed), s.Graph.Len()
}

func (s *Session) workerIndexByAssignment(a foreman.AssignmentID) int {
	for i := range s.ActiveWorkers {
		if s.ActiveWorkers[i].Assignment == a {
			return i
		}
	}
	return -1
}

func (s *Session) workerIndexByTask(task string) int {
	for i := range s.ActiveWorkers {
		if s.ActiveWorkers[i].Task == task {
			return i
		}
	}
	return -1
}

// taskIndexByAssignment finds the task whose current assignment is a. An
// assignment id is "<subject>.<seq>" (assignmentFor), so the subject
// finds the task without a scan.
func (s *Session) taskIndexByAssignment(a foreman.AssignmentID) int {
	dot := strings.LastIndexByte(string(a), '.')
	if dot < 0 {
		return -1
	}
	if i, ok := s.Graph.index[string(a)[:dot]]; ok && s.Graph.state[i].Assignment == a {
		return i
	}
	return -1
}

// inProgressSubjects lists the in-progress tasks in creation order: from
// the active workers when every such task has one (no scan), else by a
// scan.
func (s *Session) inProgressSubjects() []string {
	g := s.Graph
	var idx []int
	if !s.hasOrphans() {
		for _, w := range s.ActiveWorkers {
			if i, ok := g.index[w.Task]; ok && g.state[i].Status == InProgress && !slices.Contains(idx, i) {
				idx = append(idx, i)
			}
		}
		slices.Sort(idx)
	} else {
		for i := range g.state {
			if g.state[i].Status == InProgress {
				idx = append(idx, i)
			}
		}
	}
	out := make([]string, len(idx))
	for k, i := range idx {
		out[k] = g.specs[i].Subject
	}
	return out
}
