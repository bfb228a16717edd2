package teamsim

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman/pipeline/store"
)

// simStore is the simulated durable store: versioned records with
// tombstones, as store.Store promises, kept in memory across coordinator
// crashes. Every Apply is a crash point: the coordinator may die before
// the write reaches the disk (the un-synced tail is lost) or after it did
// but before the caller learned of it.
type simStore struct {
	w    *world
	recs map[string]map[string]*simRecord
	// writes counts the Applies that wrote.
	writes int64
}

type simRecord struct {
	version int64
	data    []byte
	deleted bool
}

func newSimStore(w *world) *simStore {
	return &simStore{w: w, recs: map[string]map[string]*simRecord{}}
}

func (s *simStore) Get(_ context.Context, kind, id string) (store.Record, error) {
	r := s.recs[kind][id]
	if r == nil || r.deleted {
		return store.Record{}, fmt.Errorf("%w: %s/%s", store.ErrNotFound, kind, id)
	}
	return store.Record{Kind: kind, ID: id, Version: r.version, Data: slices.Clone(r.data), UpdatedAt: s.w.now()}, nil
}

func (s *simStore) List(_ context.Context, kind string) ([]store.Record, error) {
	ids := make([]string, 0, len(s.recs[kind]))
	for id, r := range s.recs[kind] {
		if !r.deleted {
			ids = append(ids, id)
		}
	}
	slices.Sort(ids)
	out := make([]store.Record, len(ids))
	for i, id := range ids {
		r := s.recs[kind][id]
		out[i] = store.Record{Kind: kind, ID: id, Version: r.version, Data: slices.Clone(r.data), UpdatedAt: s.w.now()}
	}
	return out, nil
}

func (s *simStore) Apply(_ context.Context, ops ...store.Op) ([]store.Record, error) {
	if err := store.ValidateOps(ops); err != nil {
		return nil, err
	}
	for _, op := range ops {
		var cur int64
		if r := s.recs[op.Kind][op.ID]; r != nil && !r.deleted {
			cur = r.version
		}
		if cur != op.ExpectVersion {
			return nil, &store.ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: cur}
		}
	}
	s.w.crashPoint("before write " + opNames(ops))
	out := make([]store.Record, len(ops))
	for i, op := range ops {
		m := s.recs[op.Kind]
		if m == nil {
			m = map[string]*simRecord{}
			s.recs[op.Kind] = m
		}
		r := m[op.ID]
		if r == nil {
			r = &simRecord{}
			m[op.ID] = r
		}
		r.version++
		r.deleted = op.Delete
		r.data = nil
		out[i] = store.Record{Kind: op.Kind, ID: op.ID, UpdatedAt: s.w.now()}
		if !op.Delete {
			r.data = slices.Clone(op.Data)
			out[i].Version, out[i].Data = r.version, slices.Clone(op.Data)
		}
	}
	s.writes++
	s.w.crashPoint("after write " + opNames(ops))
	return out, nil
}

func opNames(ops []store.Op) string {
	names := make([]string, len(ops))
	for i, op := range ops {
		names[i] = op.Kind + "/" + op.ID
	}
	return strings.Join(names, ",")
}

func (s *simStore) Close() error { return nil }
