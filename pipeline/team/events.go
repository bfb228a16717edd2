package team

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// EventKind is what happened.
type EventKind string

const (
	// EventStoryAdded: a story joined the plan.
	EventStoryAdded EventKind = "story_added"
	// EventStageStarted: a worker was given a stage of a story.
	EventStageStarted EventKind = "stage_started"
	// EventStageFinished: a stage's worker reported; Outcome and Detail
	// say what, Line is the report.
	EventStageFinished EventKind = "stage_finished"
	// EventGates: the gate plan ran on a story's change (after each of the
	// build stage's iterations, and in the quality-gate stage); Outcome is
	// PASS or FAIL, Detail the failing checks.
	EventGates EventKind = "gates"
	// EventReviewed: the reviewer judged a build stage's work; Outcome is
	// APPROVED or REJECTED, Detail the feedback.
	EventReviewed EventKind = "reviewed"
	// EventStoryPaused: a story waits for a person; Escalation says why
	// and what to do (Resolve).
	EventStoryPaused EventKind = "story_paused"
	// EventStoryMerged: a story landed on the target branch as Commit.
	EventStoryMerged EventKind = "story_merged"
	// EventStoryResolved: a person decided about a paused story (Action).
	EventStoryResolved EventKind = "story_resolved"
	// EventWorker: the worker pool reports trouble with a story's worker
	// (stalled, dead, failed, lost, rate-limited, waiting for a person,
	// slow but working); Detail says what and why.
	EventWorker EventKind = "worker"
	// EventConflict: a story's merge conflicts (Outcome SQUASH: the
	// squash onto the target; REBASE: the rebase of its branch onto the
	// target too, which was aborted); Files name the files.
	EventConflict EventKind = "conflict"
	// EventRebased: conflict triage rebased a story's branch onto the
	// target cleanly; the gate plan runs on the rebased change next.
	EventRebased EventKind = "rebased"
	// EventConflictRework: a conflicting story went back to its builder,
	// once, with the conflict (Files, both sides) in its memory.
	EventConflictRework EventKind = "conflict_rework"
	// EventRunStarted and EventRunFinished bracket a Run; Detail of the
	// latter says how it ended.
	EventRunStarted  EventKind = "run_started"
	EventRunFinished EventKind = "run_finished"
	// EventUsage: a stage's agent reported what it spent (Tokens, CostUSD:
	// this report's, not a running total); the story's status adds it up.
	EventUsage EventKind = "usage"
)

// Event is one thing that happened to the team. Seq numbers events from
// 1 in the order they were recorded, on across restarts of the host (the
// events are kept in the team's store).
type Event struct {
	Seq   uint64         `json:"seq"`
	Kind  EventKind      `json:"kind"`
	At    time.Time      `json:"at"`
	Story foreman.ItemID `json:"story,omitempty"`
	// Stage is the story's stage (0-based), for events about a story.
	Stage      int                  `json:"stage"`
	Role       string               `json:"role,omitempty"`
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Outcome is a finished stage's outcome (COMPLETE, GO, PASS, FAIL,
	// ERROR, ...); Line the report it came from; Detail the reason,
	// issues or error, or what ended a run.
	Outcome    pipeline.Outcome     `json:"outcome,omitempty"`
	Line       string               `json:"line,omitempty"`
	Detail     string               `json:"detail,omitempty"`
	Commit     string               `json:"commit,omitempty"`
	Action     Action               `json:"action,omitempty"`
	Escalation *pipeline.Escalation `json:"escalation,omitempty"`
	// Tokens and CostUSD are what an EventUsage reports.
	Tokens  int64   `json:"tokens,omitempty"`
	CostUSD float64 `json:"costUSD,omitempty"`
	// Started is, for EventStoryMerged and EventStoryPaused, when the story
	// started its first stage (At minus Started is how long it took, also
	// across restarts of the host).
	Started time.Time `json:"started,omitzero"`
	// Files are the conflicting files of a conflict event.
	Files []string `json:"files,omitempty"`
}

// eventLog records the events: in the store first (when it has one), so
// that numbering goes on across restarts and a subscriber that comes back
// with the last sequence number it saw misses nothing, then in memory for
// this process's subscribers. Appending never waits for a subscriber:
// each reads from its own cursor on its own goroutine, so a slow one only
// falls behind.
//
// With a store, memory holds a window of the latest events only (between
// window and twice as many): older ones are read back from the store, so
// that the log's memory does not grow with the plan. Once an event could
// not be written to the store, every event from then on stays in memory
// (the store cannot give it back). Without a store, memory holds every
// event.
type eventLog struct {
	hook func(Event)
	db   store.Store // nil: memory only
	log  *slog.Logger
	// window is how many events memory keeps at least (with a store).
	window int

	mu sync.Mutex
	// base is the sequence number of the last event not in evs (recorded
	// before this process, or dropped from the window since); evs holds
	// the ones after it, evs[i].Seq == base+i+1.
	base    uint64
	counter int64 // the sequence counter record's version
	evs     []Event
	// unstored: an event could not be written to the store; memory keeps
	// every event from then on.
	unstored bool
	wake     chan struct{} // closed and replaced on every append
	// The open chunk (when chunkOpen): its number, its record's version
	// and data (what the next event is appended to).
	chunk     uint64
	chunkOpen bool
	chunkVer  int64
	chunkData []byte
	// buf and seqBuf are reused for each event's record and the counter's.
	buf, seqBuf []byte
}

// eventWindow is how many of the latest events a team with a store keeps
// in memory at least (twice as many at most): about 1-3 MB.
const eventWindow = 4096

// storedByGet: a range of recorded events at most this long is read one
// record at a time; a longer one with one List of the kind.
const storedByGet = 256

// Store kinds of the event stream: the events in chunks of eventChunk
// consecutive numbers, one record per chunk (its id the chunk's first
// number zero-padded, so that List returns them in order; its data each
// event's record, eventcodec.go, after its length as a uvarint), and one
// counter record holding the last number. Earlier versions of the team
// wrote one record per event (kindEvent, its id the number zero-padded,
// in JSON), as this one does for an event too long for its chunk
// (maxChunkBytes): both are read.
//
// A chunk's record is written again with each event it gets (about 1.4
// kB on average): a record per event cost more than the event itself in
// a store that keeps its records in memory (a map slot and an id per
// record), and every event of a memory-only team stays there.
const (
	kindEvents     = "team.events"
	kindEvent      = "team.event"
	kindEventSeq   = "team.eventseq"
	eventSeqRecord = "last"
)

// eventChunk is how many consecutive event numbers one record holds.
const eventChunk = 32

// maxChunkBytes bounds a chunk's record: an event that would take it past
// this is written to a record of its own (kindEvent, in the compact form),
// so that what is written again with each event stays bounded whatever
// an agent prints.
const maxChunkBytes = 8 << 10

func eventID(seq uint64) string { return fmt.Sprintf("%020d", seq) }

// chunkOf is the number of the chunk that holds event seq (>= 1).
func chunkOf(seq uint64) uint64 { return (seq - 1) / eventChunk }

// chunkID is chunk c's record id: its first event number's.
func chunkID(c uint64) string { return eventID(c*eventChunk + 1) }

// eachChunkEvent calls fn with each event of a chunk's record, in order.
func eachChunkEvent(data []byte, fn func(Event)) error {
	for len(data) > 0 {
		n, k := binary.Uvarint(data)
		if k <= 0 || n > uint64(len(data)-k) {
			return fmt.Errorf("%w: a length past the record's end", errCorruptEvent)
		}
		e, err := decodeEvent(data[k : k+int(n)])
		if err != nil {
			return err
		}
		fn(e)
		data = data[k+int(n):]
	}
	return nil
}

// newEventLog opens the event stream kept in db (nil: in memory only).
func newEventLog(ctx context.Context, db store.Store, hook func(Event), log *slog.Logger) (*eventLog, error) {
	l := &eventLog{hook: hook, db: db, log: log, window: eventWindow, wake: make(chan struct{})}
	if db == nil {
		return l, nil
	}
	rec, err := db.Get(ctx, kindEventSeq, eventSeqRecord)
	switch {
	case errors.Is(err, store.ErrNotFound):
	case err != nil:
		return nil, err
	default:
		n, perr := strconv.ParseUint(string(rec.Data), 10, 64)
		if perr != nil {
			return nil, fmt.Errorf("team: corrupt event counter %q: %w", rec.Data, perr)
		}
		l.base, l.counter = n, rec.Version
	}
	return l, nil
}

func (l *eventLog) add(e Event) Event {
	l.mu.Lock()
	e.Seq = l.base + uint64(len(l.evs)) + 1
	if l.db != nil {
		if err := l.persist(e); err != nil {
			// The team goes on; the event is only this process's.
			l.log.Warn("team: recording an event", "seq", e.Seq, "kind", e.Kind, "err", err)
			l.unstored = true
		}
	}
	l.evs = append(l.evs, e)
	if l.db != nil && !l.unstored && l.window > 0 && len(l.evs) >= 2*l.window {
		// The older ones are in the store: keep the latest window, in a
		// new array so that the old one is freed.
		drop := len(l.evs) - l.window
		l.evs = append(make([]Event, 0, 2*l.window), l.evs[drop:]...)
		l.base += uint64(drop)
	}
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	if l.hook != nil {
		l.hook(e)
	}
	return e
}

// persist writes the event, appended to its chunk's record (in its
// compact form: eventcodec.go), and the counter in one Apply.
func (l *eventLog) persist(e Event) error {
	c := chunkOf(e.Seq)
	if !l.chunkOpen || l.chunk != c {
		if err := l.openChunk(c); err != nil {
			return err
		}
	}
	rec, err := appendEvent(l.buf[:0], e)
	if err != nil {
		return err
	}
	l.buf = rec
	seq := strconv.AppendUint(l.seqBuf[:0], e.Seq, 10)
	l.seqBuf = seq
	n := len(l.chunkData)
	if n+binary.MaxVarintLen64+len(rec) > maxChunkBytes {
		// A long event (an agent's long line) gets a record of its own, so
		// that the chunk's record written again with each event stays short.
		recs, err := l.db.Apply(context.Background(),
			store.Op{Kind: kindEvent, ID: eventID(e.Seq), Data: rec},
			store.Op{Kind: kindEventSeq, ID: eventSeqRecord, ExpectVersion: l.counter, Data: seq})
		if err != nil {
			return err
		}
		l.counter = recs[1].Version
		return nil
	}
	data := binary.AppendUvarint(l.chunkData, uint64(len(rec)))
	data = append(data, rec...)
	recs, err := l.db.Apply(context.Background(),
		store.Op{Kind: kindEvents, ID: chunkID(c), ExpectVersion: l.chunkVer, Data: data},
		store.Op{Kind: kindEventSeq, ID: eventSeqRecord, ExpectVersion: l.counter, Data: seq})
	if err != nil {
		l.chunkData = data[:n] // the store copies what it keeps: data is ours
		return err
	}
	l.chunkData, l.chunkVer, l.counter = data, recs[0].Version, recs[1].Version
	return nil
}

// openChunk reads chunk c's record, which the next events are appended
// to (none yet: an empty one).
func (l *eventLog) openChunk(c uint64) error {
	r, err := l.db.Get(context.Background(), kindEvents, chunkID(c))
	switch {
	case errors.Is(err, store.ErrNotFound):
		l.chunkData, l.chunkVer = l.chunkData[:0], 0
	case err != nil:
		return err
	default:
		l.chunkData, l.chunkVer = r.Data, r.Version
	}
	l.chunk, l.chunkOpen = c, true
	return nil
}

// since returns the events with Seq > after and a channel closed on the
// next append. Events from before this process, or dropped from the
// window since, are read from the store.
func (l *eventLog) since(after uint64) ([]Event, <-chan struct{}) {
	l.mu.Lock()
	base, wake := l.base, l.wake
	var mem []Event
	if n := base + uint64(len(l.evs)); after < n {
		from := uint64(0)
		if after > base {
			from = after - base
		}
		mem = append([]Event(nil), l.evs[from:]...)
	}
	l.mu.Unlock()
	if after >= base || l.db == nil {
		return mem, wake
	}
	old, err := l.stored(after, base)
	if err != nil {
		l.log.Warn("team: reading recorded events", "after", after, "err", err)
	}
	return append(old, mem...), wake
}

// last is the sequence number of the last event recorded.
func (l *eventLog) last() uint64 {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.base + uint64(len(l.evs))
}

// stored reads the recorded events with after < Seq <= upTo from their
// chunks' records: one at a time for a short range (a subscriber just
// behind the window), else with one List; and those recorded one per
// record (by earlier versions of the team) the same way, when the chunks
// do not hold every number.
func (l *eventLog) stored(after, upTo uint64) ([]Event, error) {
	ctx := context.Background()
	var recs []store.Record
	first, last := chunkOf(after+1), chunkOf(upTo)
	if upTo-after <= storedByGet {
		for c := first; c <= last; c++ {
			r, err := l.db.Get(ctx, kindEvents, chunkID(c))
			if errors.Is(err, store.ErrNotFound) {
				continue
			}
			if err != nil {
				return nil, err
			}
			recs = append(recs, r)
		}
	} else {
		var err error
		if recs, err = l.db.List(ctx, kindEvents); err != nil {
			return nil, err
		}
	}
	var out []Event
	for _, r := range recs {
		err := eachChunkEvent(r.Data, func(e Event) {
			if e.Seq > after && e.Seq <= upTo {
				out = append(out, e)
			}
		})
		if err != nil {
			return out, fmt.Errorf("team: corrupt events %s: %w", r.ID, err)
		}
	}
	if uint64(len(out)) == upTo-after {
		return out, nil
	}
	single, err := l.storedOnePerRecord(after, upTo, out)
	return mergeEvents(out, single), err
}

// storedOnePerRecord reads the events with after < Seq <= upTo that
// earlier versions of the team recorded one per record, leaving out the
// numbers in have (sorted).
func (l *eventLog) storedOnePerRecord(after, upTo uint64, have []Event) ([]Event, error) {
	ctx := context.Background()
	var out []Event
	if upTo-after-uint64(len(have)) <= storedByGet {
		for seq, h := after+1, 0; seq <= upTo; seq++ {
			for h < len(have) && have[h].Seq < seq {
				h++
			}
			if h < len(have) && have[h].Seq == seq {
				continue
			}
			r, err := l.db.Get(ctx, kindEvent, eventID(seq))
			if errors.Is(err, store.ErrNotFound) {
				continue // not recorded
			}
			if err != nil {
				return out, err
			}
			e, err := decodeEvent(r.Data)
			if err != nil {
				return out, fmt.Errorf("team: corrupt event %s: %w", r.ID, err)
			}
			out = append(out, e)
		}
		return out, nil
	}
	recs, err := l.db.List(ctx, kindEvent)
	if err != nil {
		return nil, err
	}
	for _, r := range recs {
		e, err := decodeEvent(r.Data)
		if err != nil {
			return out, fmt.Errorf("team: corrupt event %s: %w", r.ID, err)
		}
		if e.Seq > after && e.Seq <= upTo {
			out = append(out, e)
		}
	}
	return out, nil
}

// mergeEvents merges two lists sorted by Seq into one, a number in both
// once.
func mergeEvents(a, b []Event) []Event {
	if len(b) == 0 {
		return a
	}
	out := make([]Event, 0, len(a)+len(b))
	for len(a) > 0 && len(b) > 0 {
		switch {
		case a[0].Seq < b[0].Seq:
			out, a = append(out, a[0]), a[1:]
		case b[0].Seq < a[0].Seq:
			out, b = append(out, b[0]), b[1:]
		default:
			out, a, b = append(out, a[0]), a[1:], b[1:]
		}
	}
	return append(append(out, a...), b...)
}

// Events returns the events recorded after sequence number after (0: all
// of them), those of earlier runs of the team included: events are kept
// in the team's store and numbered on across restarts. Memory holds the
// latest few thousand only (a team without a store, every one): reading
// further back reads the store (one List of every event when more than a
// few hundred are asked for), so Events(0) of a large plan costs what
// reading its whole history costs.
func (t *Team) Events(after uint64) []Event {
	evs, _ := t.events.since(after)
	return evs
}

// LastSeq is the sequence number of the last event recorded so far (0
// when there is none): Subscribe(ctx, t.LastSeq()) follows the team from
// now on, leaving out the events of earlier runs.
func (t *Team) LastSeq() uint64 { return t.events.last() }

// Subscribe delivers the events recorded after sequence number after
// (from earlier runs of the team too: 0 replays every event the team's
// store holds; LastSeq gives "from now"), and every later one, on the
// returned channel, in order, until ctx ends (then the channel is closed).
// A subscriber that does not keep up falls behind without holding up the
// team, and loses nothing: it reads the log at its own pace. A client that
// reconnects with the last Seq it saw misses nothing. To follow one Run to
// its end, read until EventRunFinished, then cancel ctx: every Run that
// started records one, also when it stops on its context or a fault (its
// Detail then says "stopped: " and why); a Run refused at once (ErrRunning,
// ErrBusy, ErrClosed) records neither EventRunStarted nor EventRunFinished.
func (t *Team) Subscribe(ctx context.Context, after uint64) <-chan Event {
	ch := make(chan Event)
	go func() {
		defer close(ch)
		for {
			evs, wake := t.events.since(after)
			for _, e := range evs {
				select {
				case ch <- e:
					after = e.Seq
				case <-ctx.Done():
					return
				}
			}
			if len(evs) > 0 {
				continue
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
