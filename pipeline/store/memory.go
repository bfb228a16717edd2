package store

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
)

// MemoryOptions configures a Memory store. The zero value is ready to use.
type MemoryOptions struct {
	// Clock stamps UpdatedAt. Default: the wall clock.
	Clock foreman.Clock
}

// Memory is a Store that keeps its records in process memory. It is safe
// for concurrent use; nothing survives the process. The zero value is not
// usable: call NewMemory.
type Memory struct {
	clock clock.Clock

	mu      sync.RWMutex
	closed  bool
	records map[recordKey]Record
	// tombstones holds the last version of each deleted record until it is
	// created again or purged; a key is never in both maps.
	tombstones map[recordKey]tombstone
}

type recordKey struct{ kind, id string }

type tombstone struct {
	version   int64
	deletedAt time.Time
}

var (
	_ Store           = (*Memory)(nil)
	_ TombstonePurger = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory(opts MemoryOptions) *Memory {
	return &Memory{
		clock:      clock.OrReal(opts.Clock),
		records:    make(map[recordKey]Record),
		tombstones: make(map[recordKey]tombstone),
	}
}

// Get implements Store.
func (m *Memory) Get(ctx context.Context, kind, id string) (Record, error) {
	if err := ctx.Err(); err != nil {
		return Record{}, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return Record{}, ErrClosed
	}
	r, ok := m.records[recordKey{kind, id}]
	if !ok {
		return Record{}, notFound(kind, id)
	}
	return cloneRecord(r), nil
}

// List implements Store.
func (m *Memory) List(ctx context.Context, kind string) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	m.mu.RLock()
	defer m.mu.RUnlock()
	if m.closed {
		return nil, ErrClosed
	}
	var out []Record
	for k, r := range m.records {
		if k.kind == kind {
			out = append(out, cloneRecord(r))
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// Apply implements Store. The whole batch is checked under the write lock
// before the first record changes, which is what makes it atomic.
func (m *Memory) Apply(ctx context.Context, ops ...Op) ([]Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := ValidateOps(ops); err != nil {
		return nil, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return nil, ErrClosed
	}
	for _, op := range ops {
		// A deleted record is absent here (its tombstone lives apart), so
		// it matches only ExpectVersion 0 and conflicts with Actual 0.
		actual := m.records[recordKey{op.Kind, op.ID}].Version
		if actual != op.ExpectVersion {
			return nil, &ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: actual}
		}
	}
	now := m.clock.Now().UTC().Round(0) // Round(0) drops the monotonic reading
	out := make([]Record, len(ops))
	for i, op := range ops {
		k := recordKey{op.Kind, op.ID}
		if op.Delete {
			delete(m.records, k)
			m.tombstones[k] = tombstone{version: op.ExpectVersion, deletedAt: now}
			out[i] = Record{Kind: op.Kind, ID: op.ID, UpdatedAt: now}
			continue
		}
		version := op.ExpectVersion + 1
		if op.ExpectVersion == 0 {
			version = m.tombstones[k].version + 1
			delete(m.tombstones, k)
		}
		r := Record{Kind: op.Kind, ID: op.ID, Version: version, Data: cloneData(op.Data), UpdatedAt: now}
		m.records[k] = r
		out[i] = cloneRecord(r)
	}
	return out, nil
}

// PurgeTombstones implements TombstonePurger.
func (m *Memory) PurgeTombstones(ctx context.Context, deletedBefore time.Time) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return 0, ErrClosed
	}
	purged := 0
	for k, ts := range m.tombstones {
		if ts.deletedAt.Before(deletedBefore) {
			delete(m.tombstones, k)
			purged++
		}
	}
	return purged, nil
}

// Close implements Store. It drops every record and tombstone.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.records = nil
	m.tombstones = nil
	return nil
}

func cloneRecord(r Record) Record {
	r.Data = cloneData(r.Data)
	return r
}

// cloneData returns a copy that is never nil, so that empty documents read
// back the same from every store.
func cloneData(b []byte) []byte {
	out := make([]byte, len(b))
	copy(out, b)
	return out
}

func notFound(kind, id string) error {
	return fmt.Errorf("%w: %s/%s", ErrNotFound, kind, id)
}
