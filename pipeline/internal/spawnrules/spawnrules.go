package spawnrules

import (
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/worker"
)

// Admission is what a spawn of an assignment does.
type Admission int

const (
	// Submit: the assignment is new to this process (or the spawn-twice
	// mutant is on): record it with Add and submit it to the pool.
	Submit Admission = iota
	// Known: this process already spawned it; the spawn succeeds and does
	// nothing (a spawn is idempotent by assignment within the process).
	Known
	// Closed: the spawner is closed; the spawn fails with
	// pipeline.ErrSpawnerClosed.
	Closed
)

// ProbeAnswer is how a probe of an assignment is answered.
type ProbeAnswer int

const (
	// StatusReply: the pool still holds the assignment (queued, running,
	// in review, recovering) and watches its worker itself:
	// EventStatusReply.
	StatusReply ProbeAnswer = iota
	// TimeoutNow: the pool has finished with it (completed, or parked: its
	// worker failed, was killed or went silent), or this process never ran
	// it (a coordinator restart): nobody is working on it, so
	// EventProbeTimeout at once.
	TimeoutNow
	// TimeoutLater: known, not ended, and not in the pool yet:
	// EventProbeTimeout after the probe timeout, unless a shutdown comes
	// first.
	TimeoutLater
)

// Entry is one assignment spawned in this process whose end was not
// taken yet: P is what its caller keeps about it (the request, the
// agent's report).
type Entry[P any] struct {
	P P
	// shutdown: the pipeline asked it to stop, so its end is nobody's
	// news.
	shutdown bool
}

// Shutdown reports whether the pipeline asked the assignment to stop.
func (e *Entry[P]) Shutdown() bool { return e.shutdown }

// Table is the assignments spawned in this process: an entry for each
// whose end was not taken yet, and only the id of each whose end was (a
// tombstone), so that what a finished assignment no longer needs is freed.
type Table[P any] struct {
	m     map[foreman.AssignmentID]*Entry[P]
	ended map[foreman.AssignmentID]struct{}
}

// New returns an empty table.
func New[P any]() *Table[P] {
	return &Table[P]{m: map[foreman.AssignmentID]*Entry[P]{}, ended: map[foreman.AssignmentID]struct{}{}}
}

// Len returns how many assignments have an entry (held) and how many are
// tombstones (ended).
func (t *Table[P]) Len() (held, ended int) { return len(t.m), len(t.ended) }

// Admit says what a spawn of a does when the spawner is closed or not.
func (t *Table[P]) Admit(a foreman.AssignmentID, closed bool) Admission {
	_, known := t.m[a]
	if _, ended := t.ended[a]; ended {
		known = true
	}
	switch {
	case closed:
		return Closed
	case known && !mutant.Active(mutant.SpawnTwice):
		return Known
	}
	return Submit
}

// Add records a spawn that Admit let through, before it is submitted.
func (t *Table[P]) Add(a foreman.AssignmentID, p P) *Entry[P] {
	e := &Entry[P]{P: p}
	t.m[a] = e
	return e
}

// Forget drops a spawn whose submission failed: a re-issued spawn tries
// again.
func (t *Table[P]) Forget(a foreman.AssignmentID) { delete(t.m, a) }

// Get returns the entry of a, or nil when this process never spawned it
// or its end was taken.
func (t *Table[P]) Get(a foreman.AssignmentID) *Entry[P] { return t.m[a] }

// Ends reports whether a pool event ends its assignment (completed,
// parked, or found closed): its end is the agent's report or EventIdle.
func Ends(k worker.EventKind) bool {
	switch k {
	case worker.EventCompleted, worker.EventParked, worker.EventItemClosed:
		return true
	}
	return false
}

// Forgets reports whether the pool is to forget an assignment whose end
// the pool event k is (End returned its entry): a parked one, which
// nobody submits again (a retry is a new assignment), so that the pool
// frees it and its prompt too. A completed one the pool frees itself.
func Forgets(k worker.EventKind) bool { return k == worker.EventParked }

// End takes the end of assignment a (Ends said its pool event ends it):
// it returns the entry, nil when there is no end to take (this process
// never spawned it, its end was taken already, or after Close), and
// whether the end is reported to the inbox (not for one the pipeline shut
// down). From then on only a's id is kept.
func (t *Table[P]) End(a foreman.AssignmentID, closed bool) (*Entry[P], bool) {
	e := t.m[a]
	if e == nil || closed {
		return nil, false
	}
	delete(t.m, a)
	t.ended[a] = struct{}{}
	return e, !e.shutdown
}

// Shut marks a shutdown request for a and returns its entry (nil when
// never spawned here): its running agent is to be cancelled, an agent not
// started yet is not to run, its end is not reported, and a probe timeout
// pending for it is dropped.
func (t *Table[P]) Shut(a foreman.AssignmentID) *Entry[P] {
	e := t.m[a]
	if e != nil {
		e.shutdown = true
	}
	return e
}

// Held reports whether the pool still holds a (queued, running, in
// review, recovering) and so watches its worker itself; item is the
// pool's view (worker.Dispatcher.Item).
func (t *Table[P]) Held(a foreman.AssignmentID, item func(foreman.ItemID) (worker.ItemInfo, bool)) bool {
	if t.m[a] == nil {
		return false
	}
	info, ok := item(foreman.ItemID(a))
	return ok && info.State != worker.Done && info.State != worker.Parked
}

// Probe says how a probe of a is answered; item is the pool's view.
func (t *Table[P]) Probe(a foreman.AssignmentID, item func(foreman.ItemID) (worker.ItemInfo, bool)) ProbeAnswer {
	if t.Held(a, item) {
		return StatusReply
	}
	if t.m[a] == nil {
		return TimeoutNow
	}
	return TimeoutLater
}

// PoolConfig sets what the spawner imposes on the pool's configuration: a
// fresh worker for every stage (worker.ModeFresh), and no crash or stall
// budget of the pool's own (-1), so that an assignment whose worker fails,
// falls silent or stalls is parked at once and the pipeline's crash
// protocol decides what follows (its crash budget, the retry worker, the
// resume from the checkpoint).
func PoolConfig(wc worker.Config) worker.Config {
	wc.Mode = worker.ModeFresh
	wc.CrashBudget, wc.StallBudget = -1, -1
	return wc
}

// Item is the pool's item for an assignment: its ID is the pipeline's
// AssignmentID (the pool's own assignment ids fence its messages, the
// pipeline's fence the reports), reviewed when review is set.
func Item(a foreman.AssignmentID, stage int, prompt, worktree string, review bool) worker.Item {
	return worker.Item{ID: foreman.ItemID(a), Stage: stage, Prompt: prompt, Worktree: worktree, RequireReview: review}
}

// Review reports whether a spawn is reviewed: a reviewer is set and
// require (nil: every stage) names the spawn's stage.
func Review(reviewer bool, require func() bool) bool {
	return reviewer && (require == nil || require())
}

// ReportOf finds an agent's report about item in text (its final message,
// or its output): the last line that is a canonical worker message about
// the item, with that line. A line about another story, or garbage, is no
// report: the assignment ends with EventIdle.
func ReportOf(item foreman.ItemID, text string) (message.Message, string, bool) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m, err := message.Parse(lines[i])
		if err == nil && m.Kind().FromWorker() && m.ItemID() == item {
			return m, lines[i], true
		}
	}
	return nil, "", false
}

// Envelope is what an assignment's end delivers to the inbox: its report
// m (raw: the line it came from), wrapped for the assignment's worker.
// ok is false when the end is EventIdle instead: it has no report (err
// nil), or its worker or assignment id is invalid (err says which).
func Envelope(w foreman.WorkerID, a foreman.AssignmentID, m message.Message, raw string, now time.Time) (env message.Envelope, ok bool, err error) {
	if m == nil {
		return message.Envelope{}, false, nil
	}
	env, err = message.Wrap(w, a, m, now)
	if err != nil {
		return env, false, err
	}
	env.Raw = raw
	return env, true, nil
}
