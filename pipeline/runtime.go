package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// RuntimeConfig configures a Runtime. Zero values mean the documented
// defaults; Store, Spawner, Messenger, Worktrees, Merger and Board are
// required.
type RuntimeConfig struct {
	// Flow is the items' flow of stages; NewRuntime validates it.
	// Default: StoryFlow(StoryConfig{}).
	Flow *Flow
	// Store keeps one record per item, of kind Kind. Required.
	Store store.Store
	// Kind is the store kind of the item records. Default: RecordKind
	// ("item").
	Kind string

	// Spawner starts the workers. Required.
	Spawner Spawner
	// Messenger delivers the coordinator's messages to workers. Required.
	Messenger Messenger
	// Worktrees makes and removes the items' worktrees (Git adapts a
	// merge.Manager). Required.
	Worktrees Worktrees
	// Merger squash-merges done items (Git adapts a merge.Manager).
	// Required.
	Merger Merger
	// Board is the kanban board re-read to check a worker's claims and
	// updated when an item moves (FileBoard is one). Required.
	Board Board
	// Escalator hands escalations to a person; every escalation is also
	// logged and kept in the item's State.Pause. Default: none (nil:
	// escalations are only logged and kept).
	Escalator Escalator
	// Reporter writes an item's section of the run report when it is DONE
	// or PAUSED (FileReporter is one). Default: none (nil: no report is
	// written).
	Reporter Reporter

	// Clock stamps each transition (State.Updated). Default: the wall
	// clock.
	Clock foreman.Clock
	// Logger receives the runtime's records: escalations, ignored, stale
	// and duplicate messages, reports without a rule. Default: none (nil
	// discards them).
	Logger *slog.Logger
}

// Stats counts what a Runtime did since it started.
type Stats struct {
	Transitions int64 // records written: a transition, or an effect done
	Effects     int64 // effects carried out
	Stale       int64 // worker events refused by sender validation
	Duplicates  int64 // reports re-ACKed by the state guard
}

// Runtime is the imperative shell around Flow.Step: for each event it loads
// the item's record, steps, persists the new state together with its
// effects, and only then carries the effects out. The effects it carried
// out are recorded done by the item's next write (the next transition's,
// a merge result's, or, once the item stops at DONE or PAUSED, one write
// at the end) instead of one write each. After a crash, Recover (or the
// item's next event) re-issues whatever is still pending, which includes
// the effects of each item's last transition; every effect is idempotent. Events of
// one item are serialized; different items proceed in parallel. Two
// Runtimes on one store are kept apart by the store's optimistic
// concurrency (a *store.ConflictError), not by a lease.
type Runtime struct {
	cfg   RuntimeConfig
	clk   foreman.Clock
	log   *slog.Logger
	mu    sync.Mutex
	locks map[foreman.ItemID]*sync.Mutex
	// items holds, per item this runtime last wrote and that has not
	// stopped, the record as written, so that its next event needs no read,
	// and the effects carried out since, which its record still lists as
	// pending: they are recorded done by the item's next write rather than
	// by a write each. Guarded by mu.
	items map[foreman.ItemID]*written
	stats struct{ transitions, effects, stale, duplicates atomic.Int64 }
}

// NewRuntime checks cfg and returns a Runtime.
func NewRuntime(cfg RuntimeConfig) (*Runtime, error) {
	if cfg.Flow == nil {
		cfg.Flow = StoryFlow(StoryConfig{})
	}
	cfg.Flow = cfg.Flow.WithDefaults()
	if err := cfg.Flow.Validate(); err != nil {
		return nil, err
	}
	if cfg.Kind == "" {
		cfg.Kind = RecordKind
	}
	for name, v := range map[string]any{"Store": cfg.Store, "Spawner": cfg.Spawner, "Messenger": cfg.Messenger,
		"Worktrees": cfg.Worktrees, "Merger": cfg.Merger, "Board": cfg.Board} {
		if v == nil {
			return nil, fmt.Errorf("pipeline: RuntimeConfig.%s is required", name)
		}
	}
	return &Runtime{cfg: cfg, clk: clock.OrReal(cfg.Clock), log: logger(cfg.Logger),
		locks: map[foreman.ItemID]*sync.Mutex{}, items: map[foreman.ItemID]*written{}}, nil
}

// Flow returns the flow in use.
func (r *Runtime) Flow() *Flow { return r.cfg.Flow }

// Stats returns the counters.
func (r *Runtime) Stats() Stats {
	return Stats{Transitions: r.stats.transitions.Load(), Effects: r.stats.effects.Load(),
		Stale: r.stats.stale.Load(), Duplicates: r.stats.duplicates.Load()}
}

func (r *Runtime) lock(item foreman.ItemID) func() {
	r.mu.Lock()
	l, ok := r.locks[item]
	if !ok {
		l = &sync.Mutex{}
		r.locks[item] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// Start starts item at its flow's first stage.
func (r *Runtime) Start(ctx context.Context, item foreman.ItemID, title string) (State, error) {
	return r.Handle(ctx, item, Event{Kind: EventStart, Title: title})
}

// Resolve restarts a PAUSED item at stage with a fresh worker, once a
// person has dealt with the escalation; note is passed to the worker as
// feedback. The budgets of stage and the stages after it start again.
func (r *Runtime) Resolve(ctx context.Context, item foreman.ItemID, stage int, note string) (State, error) {
	return r.Handle(ctx, item, Event{Kind: EventResolve, Stage: stage, Detail: note})
}

// Deliver hands the runtime a message received from item's worker (see
// message.Open: an envelope whose body did not parse is still delivered,
// and leads to a probe, then a pause). A message about another item is
// stale. Messages that are no worker report of this flow are ignored.
func (r *Runtime) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (State, error) {
	ev, ok := EventOf(env)
	if !ok {
		r.log.Debug("pipeline: ignoring message", "item", item, "kind", env.Body.Kind())
		return r.Get(ctx, item)
	}
	if env.Body != nil && env.Body.ItemID() != item {
		ev.Worker, ev.Assignment = "", "" // cannot be the item's current worker: stale
	}
	st, err := r.Handle(ctx, item, ev)
	var te *TransitionError
	if ev.Kind == EventReport && ((errors.As(err, &te) && te.Outcome != "") || errors.Is(err, ErrInvalidReport)) {
		// A well-formed line this stage has no rule for, or whose score
		// its rule does not take (a Report line's score reaches 9999): as
		// unparseable.
		r.log.Warn("pipeline: report without a rule", "item", item, "err", err)
		ev = Event{Kind: EventUnparseable, Worker: env.Sender, Assignment: env.Assignment, Detail: env.Raw}
		return r.Handle(ctx, item, ev)
	}
	return st, err
}

// Handle applies one event to item: pending effects first, then the
// transition, persisted before its effects run.
func (r *Runtime) Handle(ctx context.Context, item foreman.ItemID, ev Event) (State, error) {
	if err := item.Validate(); err != nil {
		return State{}, err
	}
	defer r.lock(item)()
	st, stale, err := r.handle(ctx, item, ev, true)
	if stale {
		// Another runtime wrote the item since this one did: decide again
		// on what the store holds.
		r.forget(item)
		st, _, err = r.handle(ctx, item, ev, false)
	}
	return st, err
}

// handle is Handle on the record this runtime last wrote (when remembered
// and useWritten is set) or on the one in the store. stale reports that
// the remembered record was not the stored one any more: nothing was
// written or carried out for ev.
func (r *Runtime) handle(ctx context.Context, item foreman.ItemID, ev Event, useWritten bool) (_ State, stale bool, _ error) {
	rec, ver, remembered, err := r.loadForEvent(ctx, item, useWritten)
	if err != nil {
		return State{}, false, err
	}
	r.skipDone(&rec, ver)
	if err := r.drain(ctx, &rec, &ver); err != nil {
		return rec.State, false, err
	}
	s := rec.State
	if ev.Kind == EventReport && ev.Board == nil && s.Status == StatusActive && ev.Stage == s.Stage &&
		s.sender(&ev) == fromCurrent && r.cfg.Flow.NeedsBoard(ev.Stage, ev.Outcome) {
		b, err := r.cfg.Board.Story(ctx, item)
		if err != nil {
			return s, false, fmt.Errorf("pipeline: re-reading the board for %s: %w", item, err)
		}
		ev.Board = &b
	}
	// The effects go straight onto the pending ones (none, after the
	// drain): rec is this call's own, decoded from the store, and nothing
	// keeps its Pending slice beyond the call (effects run by value). The
	// save also records the effects done since the last one.
	next, pending, err := r.cfg.Flow.AppendStep(rec.Pending, s, ev, r.clk.Now())
	if err != nil {
		return s, false, err
	}
	if next.Steps == s.Steps && next.Stale == s.Stale {
		r.count(s, next, ev)
		return s, false, nil // nothing changed (an expected idle, an unneeded reply)
	}
	rec.State = next
	rec.Pending = pending
	if mutant.Active(mutant.MergeBeforePersist) {
		if err := mergeFirst(ctx, r.cfg.Merger, rec); err != nil {
			return s, false, err
		}
	}
	if err := r.save(ctx, &rec, &ver); err != nil {
		return s, remembered && errors.Is(err, store.ErrConflict), err
	}
	r.count(s, next, ev)
	return rec.State, false, r.drain(ctx, &rec, &ver)
}

func (r *Runtime) count(s, next State, ev Event) {
	switch {
	case next.Stale > s.Stale:
		r.stats.stale.Add(1)
		r.log.Info("pipeline: ignoring stale message", "item", s.Item, "sender", ev.Worker,
			"assignment", ev.Assignment, "current", s.Worker, "event", ev.Kind)
	case next.Duplicates > s.Duplicates:
		r.stats.duplicates.Add(1)
		r.log.Info("pipeline: duplicate report re-ACKed", "item", s.Item, "sender", ev.Worker,
			"stage", ev.Stage, "state", s.Status, "at", s.Stage)
	}
}

// Recover re-issues the pending effects of every item in the store: what a
// coordinator does first after a restart. It returns the first error but
// tries every item.
func (r *Runtime) Recover(ctx context.Context) error {
	recs, err := r.cfg.Store.List(ctx, r.cfg.Kind)
	if err != nil {
		return err
	}
	var first error
	for _, sr := range recs {
		if _, err := r.Settle(ctx, foreman.ItemID(sr.ID)); err != nil && first == nil {
			first = err
		}
	}
	return first
}

// Settle carries out item's pending effects without a new event.
func (r *Runtime) Settle(ctx context.Context, item foreman.ItemID) (State, error) {
	defer r.lock(item)()
	rec, ver, err := r.load(ctx, item)
	if err != nil {
		return State{}, err
	}
	r.remember(rec, ver)
	r.skipDone(&rec, ver)
	if err := r.drain(ctx, &rec, &ver); err != nil {
		return rec.State, err
	}
	// A settled item may wait long for its next event: record now.
	return rec.State, r.record(ctx, &rec, &ver)
}

// Get returns item's persisted state; an unknown item is a zero State
// with StatusNew.
func (r *Runtime) Get(ctx context.Context, item foreman.ItemID) (State, error) {
	rec, _, err := r.load(ctx, item)
	return rec.State, err
}

// Pending returns item's effects not yet carried out: those its record
// lists, less those this runtime carried out and has yet to record.
func (r *Runtime) Pending(ctx context.Context, item foreman.ItemID) ([]Effect, error) {
	rec, ver, err := r.load(ctx, item)
	if err != nil {
		return nil, err
	}
	r.skipDone(&rec, ver)
	return rec.Pending, nil
}

// drain carries out the pending effects in order. Each one done is only
// noted (markDone); the record is written when a merge's result changes
// the state (that write records the effects done so far, and persists the
// result's effects before they run), when an effect fails, and once more
// at the end when the item has stopped (DONE, PAUSED), since no next event
// will write it. An active item's done effects ride on its next
// transition's write.
//
// Recording them late is safe because effects are idempotent, and because
// what a restart re-issues is a prefix of one transition's effects: an
// ACK, a shutdown, a worktree creation and the spawn that ends it.
func (r *Runtime) drain(ctx context.Context, rec *record, ver *int64) error {
	item := rec.State.Item
	for len(rec.Pending) > 0 {
		e := rec.Pending[0]
		follow, err := r.execute(ctx, rec.State, e)
		if err != nil {
			// The item may wait long for a retry: record what was done,
			// so that only the failed effect and those after it are
			// re-issued.
			err = fmt.Errorf("pipeline: %s %s: %w", e.Item, e.Kind, err)
			return errors.Join(err, r.record(ctx, rec, ver))
		}
		r.stats.effects.Add(1)
		rec.Pending = rec.Pending[1:]
		r.markDone(item, *ver)
		if follow != nil {
			next, pending, err := r.cfg.Flow.AppendStep(rec.Pending, rec.State, *follow, r.clk.Now())
			if err != nil {
				return err
			}
			rec.State, rec.Pending = next, pending
			if err := r.save(ctx, rec, ver); err != nil {
				return err
			}
		}
	}
	if rec.State.Status != StatusActive {
		return r.record(ctx, rec, ver)
	}
	return nil
}

// execute carries out one effect; a merge returns the event its result is.
func (r *Runtime) execute(ctx context.Context, s State, e Effect) (*Event, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	switch e.Kind {
	case EffectAck, EffectShutdown, EffectProbe:
		return nil, r.cfg.Messenger.Send(ctx, Outgoing{Kind: e.Kind, Item: e.Item, Worker: e.Worker,
			Assignment: e.Assignment, Stage: e.Stage, Text: e.Text(), Key: e.Key()})
	case EffectSpawn:
		name := ""
		if e.Stage >= 0 && e.Stage < len(r.cfg.Flow.Stages) {
			name = r.cfg.Flow.Stages[e.Stage].Name
		}
		return nil, r.cfg.Spawner.Spawn(ctx, SpawnRequest{Item: e.Item, Title: s.Title, Stage: e.Stage, StageName: name,
			Worker: e.Worker, Assignment: e.Assignment, Resume: e.Resume, Readiness: e.Readiness, Feedback: e.Feedback})
	case EffectCreateWorktree:
		return nil, r.cfg.Worktrees.CreateWorktree(ctx, e.Item)
	case EffectRemoveWorktree:
		return nil, r.cfg.Worktrees.RemoveWorktree(ctx, e.Item)
	case EffectMerge:
		out, err := r.cfg.Merger.Merge(ctx, MergeRequest{Item: e.Item, Title: e.Title})
		if err != nil {
			return nil, err
		}
		switch {
		case out.Landing:
			return nil, nil // the Lander reports the end (Lander.Watch)
		case len(out.Conflict) > 0:
			return &Event{Kind: EventMergeConflict, Files: out.Conflict}, nil
		case out.Refused != "":
			return &Event{Kind: EventMergeFailed, Detail: out.Refused}, nil
		}
		return &Event{Kind: EventMerged, Commit: out.Commit}, nil
	case EffectEscalate:
		if e.Escalation == nil {
			return nil, nil
		}
		r.log.Warn("pipeline: escalation", "item", e.Item, "stage", e.Stage, "reason", e.Escalation.Reason,
			"message", e.Escalation.Message)
		if r.cfg.Escalator == nil {
			return nil, nil
		}
		return nil, r.cfg.Escalator.Escalate(ctx, *e.Escalation)
	case EffectUpdateBoard:
		return nil, r.cfg.Board.SetStatus(ctx, e.Item, e.BoardStatus)
	case EffectAppendReport:
		if r.cfg.Reporter == nil {
			return nil, nil
		}
		return nil, r.cfg.Reporter.AppendReport(ctx, ReportEntry{Key: e.Key(), Flow: r.cfg.Flow, State: s})
	}
	return nil, fmt.Errorf("pipeline: unknown effect %s", e.Kind)
}
