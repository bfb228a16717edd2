package pipeline

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

// How a Runtime keeps an item's record, apart from what it does with it
// (runtime.go): the record's format, reading and writing it with the
// store's optimistic concurrency, and what the runtime remembers of the
// record it last wrote (written), so that an item's next event needs no
// read and the effects carried out since ride on its next write.

// RecordKind is the store kind of item records, unless RuntimeConfig.Kind
// says otherwise.
const RecordKind = "item"

// recordFormat is the version of the persisted record; a newer one is
// refused, never overwritten (invariant 8).
const recordFormat = 1

// ErrCorruptRecord is matched when an item's record cannot be read. The
// record is left as it is.
var ErrCorruptRecord = errors.New("pipeline: corrupt item record")

// record is what the store keeps per item: the state and the effects it
// has yet to carry out, written together in one Apply.
type record struct {
	Format  int      `json:"format"`
	State   State    `json:"state"`
	Pending []Effect `json:"pending,omitempty"`
}

// written is an item's record as this runtime last wrote it, at version,
// and how many effects, first in its pending list, it has carried out
// since.
type written struct {
	version int64
	rec     record
	done    int
}

// loadForEvent returns the record this runtime last wrote for item, when
// useWritten is set and it remembers one (remembered), else the stored one.
func (r *Runtime) loadForEvent(ctx context.Context, item foreman.ItemID, useWritten bool) (rec record, ver int64, remembered bool, err error) {
	if useWritten {
		r.mu.Lock()
		w := r.items[item]
		if w != nil {
			rec, ver = w.rec, w.version
			// Step copies State before changing it; the pending list is
			// appended to, so it gets its own array.
			rec.Pending = slices.Clone(w.rec.Pending)
		}
		r.mu.Unlock()
		if w != nil {
			return rec, ver, true, nil
		}
	}
	rec, ver, err = r.load(ctx, item)
	if err == nil {
		r.remember(rec, ver)
	}
	return rec, ver, false, err
}

// forget drops what this runtime remembers of item.
func (r *Runtime) forget(item foreman.ItemID) {
	r.mu.Lock()
	delete(r.items, item)
	r.mu.Unlock()
}

// skipDone drops from rec the pending effects this runtime carried out
// when rec was at version ver; the next save records them done. A record
// written since (by another runtime) keeps all of its pending effects.
func (r *Runtime) skipDone(rec *record, ver int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.items[rec.State.Item]; w != nil && w.version == ver && w.done <= len(rec.Pending) {
		rec.Pending = rec.Pending[w.done:]
	}
}

// remember notes rec, just read from the store at ver, as the record its
// pending effects are counted against, unless this runtime already counts
// against that version. A record with nothing pending needs no entry.
func (r *Runtime) remember(rec record, ver int64) {
	if len(rec.Pending) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.items[rec.State.Item]; w == nil || w.version != ver {
		r.items[rec.State.Item] = &written{version: ver, rec: rec}
	}
}

// markDone notes one more effect carried out of item's record at ver.
func (r *Runtime) markDone(item foreman.ItemID, ver int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if w := r.items[item]; w != nil && w.version == ver {
		w.done++
	}
}

// unrecorded says whether item's record at ver lists effects already done.
func (r *Runtime) unrecorded(item foreman.ItemID, ver int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	w := r.items[item]
	return w != nil && w.version == ver && w.done > 0
}

func (r *Runtime) load(ctx context.Context, item foreman.ItemID) (record, int64, error) {
	sr, err := r.cfg.Store.Get(ctx, r.cfg.Kind, string(item))
	if errors.Is(err, store.ErrNotFound) {
		return record{Format: recordFormat, State: State{Item: item}}, 0, nil
	}
	if err != nil {
		return record{}, 0, err
	}
	var rec record
	if err := json.Unmarshal(sr.Data, &rec); err != nil {
		return record{}, 0, fmt.Errorf("%w: %s/%s: %v", ErrCorruptRecord, sr.Kind, sr.ID, err)
	}
	if rec.Format > recordFormat || rec.State.Item != item {
		return record{}, 0, fmt.Errorf("%w: %s/%s: format %d, item %q", ErrCorruptRecord, sr.Kind, sr.ID, rec.Format, rec.State.Item)
	}
	return rec, sr.Version, nil
}

func (r *Runtime) save(ctx context.Context, rec *record, ver *int64) error {
	rec.Format = recordFormat
	if len(rec.Pending) == 0 {
		rec.Pending = nil
	}
	data, err := json.Marshal(rec)
	if err != nil {
		return err
	}
	out, err := r.cfg.Store.Apply(ctx, store.Op{Kind: r.cfg.Kind, ID: string(rec.State.Item), ExpectVersion: *ver, Data: data})
	if err != nil {
		return err
	}
	*ver = out[0].Version
	r.stats.transitions.Add(1)
	r.mu.Lock()
	if stopped := rec.State.Status == StatusDone || rec.State.Status == StatusPaused; stopped && len(rec.Pending) == 0 {
		delete(r.items, rec.State.Item) // a stopped item's next event is rare: read it then
	} else {
		r.items[rec.State.Item] = &written{version: *ver, rec: *rec}
	}
	r.mu.Unlock()
	return nil
}

// record writes rec when its stored version lists effects already done.
func (r *Runtime) record(ctx context.Context, rec *record, ver *int64) error {
	if !r.unrecorded(rec.State.Item, *ver) {
		return nil
	}
	return r.save(ctx, rec, ver)
}
