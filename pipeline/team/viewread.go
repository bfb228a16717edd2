package team

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// readInputs reads every story's inputs from the store: the graph's tasks
// (the plan, in creation order) and one List per kind of record.
func (t *Team) readInputs(ctx context.Context) ([]storyInputs, error) {
	sess, _, err := t.graph.Load(ctx, graphSession)
	if err != nil {
		return nil, err
	}
	tasks := sess.Graph.Tasks()
	out := make([]storyInputs, len(tasks))
	at := make(map[foreman.ItemID]int, len(tasks))
	for i, task := range tasks {
		out[i] = storyInputs{Story: storyOfTask(task), Task: task.Status}
		at[out[i].Story.ID] = i
	}
	each := func(kind string, fn func(in *storyInputs, data []byte) error) error {
		recs, err := t.db.List(ctx, kind)
		if err != nil {
			return err
		}
		for _, r := range recs {
			i, ok := at[foreman.ItemID(r.ID)]
			if !ok {
				continue
			}
			if err := fn(&out[i], r.Data); err != nil {
				return fmt.Errorf("team: corrupt %s record %q: %w", kind, r.ID, err)
			}
		}
		return nil
	}
	if err := each(pipeline.RecordKind, func(in *storyInputs, data []byte) error {
		var rec struct {
			State pipeline.State `json:"state"`
		}
		err := json.Unmarshal(data, &rec)
		in.State = viewStateOf(rec.State)
		return err
	}); err != nil {
		return nil, err
	}
	if err := each(kindDecision, func(in *storyInputs, data []byte) error {
		in.Dec = &decision{}
		return json.Unmarshal(data, in.Dec)
	}); err != nil {
		return nil, err
	}
	if err := each(kindMemory, func(in *storyInputs, data []byte) error {
		var m memory
		err := json.Unmarshal(data, &m)
		in.Cause = m.WorkerCause
		return err
	}); err != nil {
		return nil, err
	}
	if err := each(kindTriage, func(in *storyInputs, data []byte) error {
		in.Triage = &triageRecord{}
		return json.Unmarshal(data, in.Triage)
	}); err != nil {
		return nil, err
	}
	if err := each(kindUsage, func(in *storyInputs, data []byte) error {
		return json.Unmarshal(data, &in.Usage)
	}); err != nil {
		return nil, err
	}
	if err := each(kindRefused, func(in *storyInputs, data []byte) error {
		in.Refused = &refusedRecord{}
		return json.Unmarshal(data, in.Refused)
	}); err != nil {
		return nil, err
	}
	return out, nil
}

// statusesOf derives every story's status from the inputs, in order,
// blocking included.
func (t *Team) statusesOf(ins []storyInputs) (bases []StoryState, out []StoryStatus) {
	out = make([]StoryStatus, len(ins))
	bases = make([]StoryState, len(ins))
	at := make(map[foreman.ItemID]int, len(ins))
	for i, in := range ins {
		out[i] = t.derive(in)
		bases[i] = out[i].State
		at[in.Story.ID] = i
	}
	base := func(id foreman.ItemID) StoryState {
		if i, ok := at[id]; ok {
			return bases[i]
		}
		return ""
	}
	final := func(id foreman.ItemID) StoryState {
		if i, ok := at[id]; ok {
			return out[i].State
		}
		return ""
	}
	// Creation order puts a story after those it comes after, except
	// within one Add; passes until nothing changes settle those too.
	for changed := true; changed; {
		changed = false
		for i := range out {
			if bases[i] != StoryPending {
				continue
			}
			by := blockedBy(out[i].After, base, final)
			state := StoryPending
			if len(by) > 0 {
				state = StoryBlocked
			}
			if state != out[i].State || !slices.Equal(by, out[i].BlockedBy) {
				out[i].State, out[i].BlockedBy, changed = state, by, true
			}
		}
	}
	return bases, out
}

// rebuild reads the view again from the store's records.
func (v *statusView) rebuild(ctx context.Context) error {
	v.wmu.Lock()
	defer v.wmu.Unlock()
	return v.rebuildLocked(ctx)
}

// rebuildLocked reads every story's records, derives the view, and
// writes the view records that differ from it (none, unless the store
// was last written by a version of the team without the view, or by hand).
// v.wmu must be held.
func (v *statusView) rebuildLocked(ctx context.Context) error {
	t := v.t
	for attempt := 0; ; attempt++ {
		ins, err := t.readInputs(ctx)
		if err != nil {
			return err
		}
		bases, out := t.statusesOf(ins)
		stored, err := t.db.List(ctx, kindView)
		if err != nil {
			return err
		}
		have := make(map[string]store.Record, len(stored))
		for _, r := range stored {
			have[r.ID] = r
		}
		sumRec, err := t.db.Get(ctx, kindViewSum, viewSumID)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		entries := make(map[foreman.ItemID]*viewEntry, len(ins))
		order := make([]foreman.ItemID, len(ins))
		dependents := map[foreman.ItemID][]foreman.ItemID{}
		sum := viewSummary{Stories: len(ins), ByState: map[StoryState]int{}}
		var ops []store.Op
		for i, in := range ins {
			id := in.Story.ID
			e := &viewEntry{in: in, base: bases[i], ss: out[i], order: i, viewVer: have[string(id)].Version}
			entries[id], order[i] = e, id
			for _, a := range in.Story.After {
				dependents[a] = append(dependents[a], id)
			}
			sum.ByState[e.ss.State]++
			sum.Tokens += in.Usage.Tokens
			sum.CostUSD += in.Usage.CostUSD
			sum.Refused += in.refused()
			data, err := json.Marshal(viewRecord{Order: i, Status: e.ss})
			if err != nil {
				return err
			}
			if r, ok := have[string(id)]; !ok || !bytes.Equal(r.Data, data) {
				ops = append(ops, store.Op{Kind: kindView, ID: string(id), ExpectVersion: r.Version, Data: data})
			}
		}
		sumData, err := json.Marshal(sum)
		if err != nil {
			return err
		}
		sumVer := sumRec.Version
		if len(ops) > 0 || !bytes.Equal(sumRec.Data, sumData) {
			ops = append(ops, store.Op{Kind: kindViewSum, ID: viewSumID, ExpectVersion: sumRec.Version, Data: sumData})
			recs, err := v.inner.Apply(ctx, ops...)
			if errors.Is(err, store.ErrConflict) && attempt < maxViewRetries {
				continue // written meanwhile by another process
			}
			if err != nil {
				return err
			}
			for k, op := range ops[:len(ops)-1] {
				entries[foreman.ItemID(op.ID)].viewVer = recs[k].Version
			}
			sumVer = recs[len(recs)-1].Version
		}
		v.mu.Lock()
		v.entries, v.order, v.dependents, v.sum, v.sumVer = entries, order, dependents, sum, sumVer
		v.rev++
		v.mu.Unlock()
		return nil
	}
}

// fresh reads the view again when another process changed it (its
// summary record's version moved).
func (v *statusView) fresh(ctx context.Context) error {
	rec, err := v.t.db.Get(ctx, kindViewSum, viewSumID)
	if err != nil && !errors.Is(err, store.ErrNotFound) {
		return err
	}
	v.mu.Lock()
	same := rec.Version == v.sumVer
	v.mu.Unlock()
	if same {
		return nil
	}
	v.wmu.Lock()
	defer v.wmu.Unlock()
	v.mu.Lock()
	same = rec.Version <= v.sumVer // written here meanwhile
	v.mu.Unlock()
	if same {
		return nil
	}
	return v.rebuildLocked(ctx)
}

// statuses copies every story's status, in plan order; running stories
// get their Retrying from this process.
func (v *statusView) statuses(retries *providerRetries) []StoryStatus {
	v.mu.Lock()
	out := make([]StoryStatus, len(v.order))
	for i, id := range v.order {
		out[i] = v.entries[id].ss
	}
	v.mu.Unlock()
	for i := range out {
		copyShared(&out[i])
		if out[i].State == StoryRunning && retries != nil {
			out[i].Retrying = retries.get(out[i].ID)
		}
	}
	return out
}

// copyShared gives s its own copy of what the view shares between reads.
func copyShared(s *StoryStatus) {
	s.After = slices.Clone(s.After)
	s.BlockedBy = slices.Clone(s.BlockedBy)
	if s.Pause != nil {
		p := *s.Pause
		s.Pause = &p
	}
	if s.Triage != nil {
		tr := *s.Triage
		tr.Files = slices.Clone(tr.Files)
		s.Triage = &tr
	}
}

// one copies one story's status.
func (v *statusView) one(id foreman.ItemID, retries *providerRetries) (StoryStatus, bool) {
	v.mu.Lock()
	e := v.entries[id]
	var s StoryStatus
	if e != nil {
		s = e.ss
	}
	v.mu.Unlock()
	if e == nil {
		return StoryStatus{}, false
	}
	copyShared(&s)
	if s.State == StoryRunning && retries != nil {
		s.Retrying = retries.get(id)
	}
	return s, true
}

// summary copies the view's counts.
func (v *statusView) summary() viewSummary {
	v.mu.Lock()
	defer v.mu.Unlock()
	s := v.sum
	s.ByState = make(map[StoryState]int, len(v.sum.ByState))
	for k, n := range v.sum.ByState {
		s.ByState[k] = n
	}
	return s
}

// graphTextMax is the largest plan whose Status.Graph is the dependency
// graph's whole report; a larger one gets a summary (graphSummary): a
// report of every task costs the whole plan on every Status, and the
// stories table already shows each story's state and what blocks it.
const graphTextMax = 200

// graphFor is Status.Graph for stories: the graph's report (read from the
// store) for a plan of at most graphTextMax stories, else a summary.
func (t *Team) graphFor(ctx context.Context, stories []StoryStatus) (string, error) {
	if len(stories) > graphTextMax {
		return graphSummary(stories), nil
	}
	rep, err := t.graph.Status(ctx, graphSession)
	if err != nil {
		return "", err
	}
	return graphText(rep), nil
}

// graphSummary is the dependency graph of a large plan in a few lines:
// how many stories stand how, and the ones running, paused and blocked
// (at most a line of each).
func graphSummary(stories []StoryStatus) string {
	n := map[StoryState]int{}
	var running, paused, blocked []string
	for _, s := range stories {
		n[s.State]++
		switch s.State {
		case StoryRunning:
			running = append(running, string(s.ID))
		case StoryPaused:
			paused = append(paused, string(s.ID))
		case StoryBlocked:
			blocked = append(blocked, string(s.ID))
		}
	}
	done := n[StoryMerged] + n[StorySkipped]
	var b strings.Builder
	fmt.Fprintf(&b, "Dependency graph: %d stories, %d done (%d%%): %d merged, %d skipped, %d running, %d pending, %d paused, %d blocked, %d abandoned\n",
		len(stories), done, (200*done+len(stories))/(2*len(stories)), n[StoryMerged], n[StorySkipped], n[StoryRunning], n[StoryPending],
		n[StoryPaused], n[StoryBlocked], n[StoryAbandoned])
	b.WriteString("  (too many stories to draw each: the table above shows each one's state and what blocks it)\n")
	for _, l := range []struct {
		what string
		ids  []string
	}{{"running", running}, {"paused, waiting for a person", paused}, {"blocked", blocked}} {
		if len(l.ids) > 0 {
			fmt.Fprintf(&b, "  %s: %s\n", l.what, listSome(l.ids, 20))
		}
	}
	return b.String()
}

func listSome(ids []string, n int) string {
	if len(ids) <= n {
		return strings.Join(ids, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(ids[:n], ", "), len(ids)-n)
}

// readView reads the view records from the store: every story's status
// in plan order, from one List. found is false when the store has no
// view (written by a version of the team without it, and not opened
// since).
func readView(ctx context.Context, db store.Store) (stories []StoryStatus, found bool, err error) {
	if _, err := db.Get(ctx, kindViewSum, viewSumID); errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	} else if err != nil {
		return nil, false, err
	}
	recs, err := db.List(ctx, kindView)
	if err != nil {
		return nil, false, err
	}
	vr := make([]viewRecord, len(recs))
	for i, r := range recs {
		if err := json.Unmarshal(r.Data, &vr[i]); err != nil {
			return nil, false, fmt.Errorf("team: corrupt %s record %q: %w", kindView, r.ID, err)
		}
	}
	slices.SortFunc(vr, func(a, b viewRecord) int { return a.Order - b.Order })
	stories = make([]StoryStatus, len(vr))
	for i := range vr {
		stories[i] = vr[i].Status
	}
	return stories, true, nil
}
