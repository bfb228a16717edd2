package taskgraph

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/pipeline/store"
)

// TaskRecordKind is the store kind of a session's task records: one per
// task, id "<session>/<index>" (the index in creation order, zero-padded
// to eight digits so that List returns them in order). The session record
// (RecordKind) holds the rest and says how many there are, so that a step
// writes the session record and the tasks it changed, not every task.
// Sessions stored before (every task inside the session record) are read
// as they are and written the new way on their next step.
const TaskRecordKind = "taskgraph.task"

// storedHeader is the session record: the session file's fields without
// its tasks, and how many task records there are.
type storedHeader struct {
	sessionJSON
	TaskRecords *int `json:"task_records,omitempty"`
}

func taskRecordID(session string, i int) string {
	return fmt.Sprintf("%s/%08d", session, i)
}

// cachedSession is a session as this runtime last read or wrote it: the
// session record's version and each task record's.
type cachedSession struct {
	s       *Session
	ver     int64
	taskVer []int64
}

// readSession reads a session from the store: its record and, in the
// current format, its task records, checking that no write came between
// the two reads (else reading again).
func (r *Runtime) readSession(ctx context.Context, id string) (*cachedSession, error) {
	for attempt := 0; ; attempt++ {
		rec, err := r.cfg.Store.Get(ctx, RecordKind, id)
		if err != nil {
			if errors.Is(err, store.ErrNotFound) {
				return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
			}
			return nil, err
		}
		var h storedHeader
		if err := json.Unmarshal(rec.Data, &h); err != nil {
			return nil, &CorruptSessionError{ID: id, Err: err}
		}
		if h.TaskRecords == nil { // every task inside the record
			s, err := DecodeSession(id, rec.Data)
			if err != nil {
				return nil, err
			}
			// Written the new way, every task, on the next save.
			for i := range s.Graph.Len() {
				s.Graph.touch(i)
			}
			return &cachedSession{s: s, ver: rec.Version, taskVer: make([]int64, s.Graph.Len())}, nil
		}
		recs, err := r.cfg.Store.List(ctx, TaskRecordKind)
		if err != nil {
			return nil, err
		}
		again, err := r.cfg.Store.Get(ctx, RecordKind, id)
		if err != nil {
			return nil, err
		}
		if again.Version != rec.Version {
			if attempt < r.cfg.MaxConflictRetries {
				continue
			}
			return nil, fmt.Errorf("taskgraph: session %s changed on every read", id)
		}
		prefix := id + "/"
		tasks := make([]Task, 0, *h.TaskRecords)
		vers := make([]int64, 0, *h.TaskRecords)
		for _, tr := range recs {
			if !strings.HasPrefix(tr.ID, prefix) {
				continue
			}
			n, err := strconv.Atoi(tr.ID[len(prefix):])
			if err != nil || n != len(tasks) {
				return nil, &CorruptSessionError{ID: id, Err: fmt.Errorf("task record %s out of order (want index %d)", tr.ID, len(tasks))}
			}
			var t Task
			if err := json.Unmarshal(tr.Data, &t); err != nil {
				return nil, &CorruptSessionError{ID: id, Err: fmt.Errorf("task record %s: %w", tr.ID, err)}
			}
			tasks = append(tasks, t)
			vers = append(vers, tr.Version)
		}
		if len(tasks) < *h.TaskRecords {
			return nil, &CorruptSessionError{ID: id, Err: fmt.Errorf("%d task records, the session names %d", len(tasks), *h.TaskRecords)}
		}
		// Records past the count are not the session's (yet): their
		// versions are kept for the write that adds those tasks.
		h.Tasks = tasks[:*h.TaskRecords]
		s, err := sessionFrom(h.sessionJSON)
		if err == nil && s.ID != id {
			err = fmt.Errorf("record holds session %q", s.ID)
		}
		if err != nil {
			return nil, &CorruptSessionError{ID: id, Err: err}
		}
		return &cachedSession{s: s, ver: rec.Version, taskVer: vers}, nil
	}
}

// header is the session record of s.
func header(s *Session) ([]byte, error) {
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
	n := s.Graph.Len()
	w.TasksTotal, w.TasksCompleted = n, s.Graph.Count(Completed)
	return json.Marshal(storedHeader{sessionJSON: w, TaskRecords: &n})
}

// write saves c's session: its record, at version c.ver, and the records
// of the tasks changed since the last write, in one Apply. On success c
// holds the new versions; on failure c must not be used again (its
// session is ahead of the store).
func (r *Runtime) write(ctx context.Context, c *cachedSession) error {
	data, err := header(c.s)
	if err != nil {
		return err
	}
	g := c.s.Graph
	touched := g.takeTouched()
	ops := make([]store.Op, 0, 1+len(touched))
	ops = append(ops, store.Op{Kind: RecordKind, ID: c.s.ID, ExpectVersion: c.ver, Data: data})
	for len(c.taskVer) < g.Len() {
		c.taskVer = append(c.taskVer, 0)
	}
	changed := make([]Task, 0, len(touched))
	for _, i := range touched {
		t := g.task(i)
		td, err := json.Marshal(t)
		if err != nil {
			return err
		}
		changed = append(changed, t)
		ops = append(ops, store.Op{Kind: TaskRecordKind, ID: taskRecordID(c.s.ID, i), ExpectVersion: c.taskVer[i], Data: td})
	}
	recs, err := r.cfg.Store.Apply(ctx, ops...)
	if err != nil {
		return err
	}
	c.ver = recs[0].Version
	for k, i := range touched {
		c.taskVer[i] = recs[k+1].Version
	}
	if r.cfg.OnChange != nil && len(changed) > 0 {
		r.cfg.OnChange(c.s.ID, changed)
	}
	return nil
}
