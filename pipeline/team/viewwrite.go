package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The status view's write side, apart from its records and derivation
// (view.go) and its reads (viewread.go): viewTx, one change to the view
// being written (the records an Apply writes, the statuses they change,
// the view records and summary written with them), and viewStore, the
// team's store, whose Apply writes it.

// viewTx is a change to the view being written: the entries it changes,
// copied, with their new inputs and statuses.
type viewTx struct {
	v       *statusView
	changed map[foreman.ItemID]*viewEntry
	added   []foreman.ItemID
	// addedAfter maps a story to the stories this tx adds after it (made
	// on first use).
	addedAfter map[foreman.ItemID][]foreman.ItemID
}

func (v *statusView) begin() *viewTx {
	return &viewTx{v: v, changed: map[foreman.ItemID]*viewEntry{}}
}

// entry returns the tx's copy of a story's entry (nil: not in the view).
func (tx *viewTx) entry(id foreman.ItemID) *viewEntry {
	if e := tx.changed[id]; e != nil {
		return e
	}
	tx.v.mu.Lock()
	e := tx.v.entries[id]
	tx.v.mu.Unlock()
	if e == nil {
		return nil
	}
	c := *e
	tx.changed[id] = &c
	return &c
}

// peek returns a story's entry as the tx sees it, without copying it.
func (tx *viewTx) peek(id foreman.ItemID) *viewEntry {
	if e := tx.changed[id]; e != nil {
		return e
	}
	tx.v.mu.Lock()
	defer tx.v.mu.Unlock()
	return tx.v.entries[id]
}

// input takes one op of an Apply into the tx; it reports whether the op
// is about a story's status.
func (tx *viewTx) input(op store.Op) (bool, error) {
	var e *viewEntry
	switch op.Kind {
	case taskgraph.TaskRecordKind:
		var task taskgraph.Task
		if err := json.Unmarshal(op.Data, &task); err != nil {
			return false, fmt.Errorf("team: a task record for the view: %w", err)
		}
		id := foreman.ItemID(task.Subject)
		if e = tx.entry(id); e == nil {
			e = &viewEntry{in: storyInputs{Story: storyOfTask(task)}, order: -1}
			tx.changed[id] = e
			tx.added = append(tx.added, id)
		}
		e.in.Task = task.Status
	case pipeline.RecordKind:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		var rec struct {
			State pipeline.State `json:"state"`
		}
		if !op.Delete {
			if err := json.Unmarshal(op.Data, &rec); err != nil {
				return false, fmt.Errorf("team: the pipeline record of %s for the view: %w", op.ID, err)
			}
		}
		e.in.State = viewStateOf(rec.State)
	case kindDecision:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		e.in.Dec = nil
		if !op.Delete {
			var d decision
			if err := json.Unmarshal(op.Data, &d); err != nil {
				return false, fmt.Errorf("team: the decision about %s for the view: %w", op.ID, err)
			}
			e.in.Dec = &d
		}
	case kindMemory:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		var m memory
		if !op.Delete {
			if err := json.Unmarshal(op.Data, &m); err != nil {
				return false, fmt.Errorf("team: the memory of %s for the view: %w", op.ID, err)
			}
		}
		e.in.Cause = m.WorkerCause
	case kindTriage:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		e.in.Triage = nil
		if !op.Delete {
			var r triageRecord
			if err := json.Unmarshal(op.Data, &r); err != nil {
				return false, fmt.Errorf("team: the conflict triage of %s for the view: %w", op.ID, err)
			}
			e.in.Triage = &r
		}
	case kindUsage:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		var u usageRecord
		if !op.Delete {
			if err := json.Unmarshal(op.Data, &u); err != nil {
				return false, fmt.Errorf("team: the usage of %s for the view: %w", op.ID, err)
			}
		}
		e.in.Usage = u
	case kindRefused:
		if e = tx.entry(foreman.ItemID(op.ID)); e == nil {
			return false, nil
		}
		e.in.Refused = nil
		if !op.Delete {
			var r refusedRecord
			if err := json.Unmarshal(op.Data, &r); err != nil {
				return false, fmt.Errorf("team: the refusals of %s for the view: %w", op.ID, err)
			}
			e.in.Refused = &r
		}
	default:
		return false, nil
	}
	return true, nil
}

// settle derives the status of every story the tx changed, then of the
// stories after them whose blocking changes, and returns the ids whose
// view record is written: every story whose records the Apply writes
// (so that its view record's version moves with them, and a writer in
// another process working from an older view conflicts), and every other
// story whose status changed.
func (tx *viewTx) settle() []foreman.ItemID {
	base := func(id foreman.ItemID) StoryState {
		if e := tx.peek(id); e != nil {
			return e.base
		}
		return ""
	}
	final := func(id foreman.ItemID) StoryState {
		if e := tx.peek(id); e != nil {
			return e.ss.State
		}
		return ""
	}
	// New stories come first, in creation order, so that one after
	// another new one finds it settled.
	own := make(map[foreman.ItemID]bool, len(tx.changed))
	isAdded := make(map[foreman.ItemID]bool, len(tx.added))
	for _, id := range tx.added {
		isAdded[id] = true
	}
	work := slices.Clone(tx.added)
	var rest []foreman.ItemID
	for id := range tx.changed {
		own[id] = true
		if !isAdded[id] {
			rest = append(rest, id)
		}
	}
	slices.SortFunc(rest, compareIDs)
	work = append(work, rest...)
	written := slices.Clone(work)
	inWritten := make(map[foreman.ItemID]bool, len(work))
	for _, id := range work {
		inWritten[id] = true
	}
	queued := make(map[foreman.ItemID]bool, len(work))
	for _, id := range work {
		queued[id] = true
	}
	for k := 0; k < len(work); k++ {
		id := work[k]
		queued[id] = false
		e := tx.entry(id)
		before, beforeBy := e.ss.State, e.ss.BlockedBy
		if own[id] {
			e.ss = tx.v.t.derive(e.in)
			e.base = e.ss.State
		}
		e.ss.State, e.ss.BlockedBy = e.base, nil
		if e.base == StoryPending {
			if by := blockedBy(e.in.Story.After, base, final); len(by) > 0 {
				e.ss.State, e.ss.BlockedBy = StoryBlocked, by
			}
		}
		moved := before != e.ss.State
		if !own[id] {
			if !moved && slices.Equal(beforeBy, e.ss.BlockedBy) {
				continue
			}
			if !inWritten[id] {
				inWritten[id] = true
				written = append(written, id)
			}
		}
		if !own[id] && !moved {
			continue
		}
		tx.v.mu.Lock()
		deps := slices.Clone(tx.v.dependents[id])
		tx.v.mu.Unlock()
		for _, d := range append(deps, tx.addedDependents(id)...) {
			if !queued[d] {
				queued[d] = true
				work = append(work, d)
			}
		}
	}
	return written
}

// addedDependents are the stories this tx adds that come after id.
func (tx *viewTx) addedDependents(id foreman.ItemID) []foreman.ItemID {
	if len(tx.added) == 0 {
		return nil
	}
	if tx.addedAfter == nil {
		tx.addedAfter = map[foreman.ItemID][]foreman.ItemID{}
		for _, a := range tx.added {
			for _, b := range tx.changed[a].in.Story.After {
				tx.addedAfter[b] = append(tx.addedAfter[b], a)
			}
		}
	}
	return tx.addedAfter[id]
}

func compareIDs(a, b foreman.ItemID) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// ops are the view's writes for the stories written and the summary.
func (tx *viewTx) ops(written []foreman.ItemID) ([]store.Op, viewSummary, error) {
	v := tx.v
	v.mu.Lock()
	for k, id := range tx.added {
		tx.changed[id].order = len(v.order) + k
	}
	sum := viewSummary{Stories: v.sum.Stories + len(tx.added), ByState: make(map[StoryState]int, len(v.sum.ByState)),
		Tokens: v.sum.Tokens, CostUSD: v.sum.CostUSD, Refused: v.sum.Refused}
	for s, n := range v.sum.ByState {
		sum.ByState[s] = n
	}
	for id, e := range tx.changed {
		if old := v.entries[id]; old != nil {
			sum.ByState[old.ss.State]--
			sum.Tokens -= old.in.Usage.Tokens
			sum.CostUSD -= old.in.Usage.CostUSD
			sum.Refused -= old.in.refused()
		}
		sum.ByState[e.ss.State]++
		sum.Tokens += e.in.Usage.Tokens
		sum.CostUSD += e.in.Usage.CostUSD
		sum.Refused += e.in.refused()
	}
	sumVer := v.sumVer
	v.mu.Unlock()
	for s, n := range sum.ByState {
		if n == 0 {
			delete(sum.ByState, s)
		}
	}
	ops := make([]store.Op, 0, len(written)+1)
	for _, id := range written {
		e := tx.changed[id]
		data, err := json.Marshal(viewRecord{Order: e.order, Status: e.ss})
		if err != nil {
			return nil, sum, err
		}
		ops = append(ops, store.Op{Kind: kindView, ID: string(id), ExpectVersion: e.viewVer, Data: data})
	}
	data, err := json.Marshal(sum)
	if err != nil {
		return nil, sum, err
	}
	ops = append(ops, store.Op{Kind: kindViewSum, ID: viewSumID, ExpectVersion: sumVer, Data: data})
	return ops, sum, nil
}

// commit makes the tx's changes the view's, given the records the view's
// ops wrote (in ops order, the summary last).
func (tx *viewTx) commit(written []foreman.ItemID, recs []store.Record, sum viewSummary) {
	v := tx.v
	v.mu.Lock()
	defer v.mu.Unlock()
	for k, id := range written {
		tx.changed[id].viewVer = recs[k].Version
	}
	for _, id := range tx.added {
		e := tx.changed[id]
		v.order = append(v.order, id)
		for _, a := range e.in.Story.After {
			v.dependents[a] = append(v.dependents[a], id)
		}
	}
	for id, e := range tx.changed {
		v.entries[id] = e
	}
	v.sum, v.sumVer = sum, recs[len(recs)-1].Version
	v.rev++
}

// viewStore is the team's store: every Apply that writes a record a
// story's status is made of also writes the view's records.
type viewStore struct {
	store.Store
	v *statusView
	// afterCommit, if set (tests), runs after each write that changed the
	// view, with the view's write lock held.
	afterCommit func()
}

// maxViewRetries bounds the retries of an Apply whose view records
// another process wrote meanwhile.
const maxViewRetries = 5

func (s *viewStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	relevant := false
	for _, op := range ops {
		switch op.Kind {
		case taskgraph.TaskRecordKind, pipeline.RecordKind, kindDecision, kindMemory, kindTriage, kindUsage, kindRefused:
			relevant = true
		}
	}
	if !relevant {
		return s.Store.Apply(ctx, ops...)
	}
	v := s.v
	v.wmu.Lock()
	defer v.wmu.Unlock()
	for attempt := 0; ; attempt++ {
		tx := v.begin()
		for _, op := range ops {
			if _, err := tx.input(op); err != nil {
				// A record the view cannot read is written all the same
				// (its writer's own reader reports it); the view is read
				// again from the store on the next Status.
				v.t.log.Warn("team: the status view cannot read a record", "kind", op.Kind, "id", op.ID, "err", err)
				return s.Store.Apply(ctx, ops...)
			}
		}
		written := tx.settle()
		viewOps, sum, err := tx.ops(written)
		if err != nil {
			return nil, err
		}
		all := append(slices.Clip(ops), viewOps...)
		recs, err := s.Store.Apply(ctx, all...)
		if err == nil {
			tx.commit(written, recs[len(ops):], sum)
			if s.afterCommit != nil {
				s.afterCommit()
			}
			return recs[:len(ops):len(ops)], nil
		}
		var ce *store.ConflictError
		if errors.As(err, &ce) && (ce.Kind == kindView || ce.Kind == kindViewSum) && attempt < maxViewRetries {
			// Another process wrote the view: read it again, then retry.
			if rerr := v.rebuildLocked(ctx); rerr != nil {
				return nil, errors.Join(err, rerr)
			}
			continue
		}
		return nil, err
	}
}
