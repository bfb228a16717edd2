package store

import (
	"context"
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"strings"
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
//
// It keeps each record as one string (its version, the time of its last
// write and its data: one allocation about 10 bytes longer than the
// data) under its id in a map of its kind, so that a record costs its id,
// its data and a map slot of 32 bytes, and List costs the records of its
// kind, not the store's.
type Memory struct {
	clock clock.Clock

	mu     sync.RWMutex
	closed bool
	kinds  map[string]*memKind
}

// memKind holds the records of one kind.
type memKind struct {
	// recs holds each record's current version (memRecord's form).
	recs map[string]string
	// tombs holds the last version of each deleted record until it is
	// created again or purged; an id is never in both maps. Made on the
	// kind's first delete.
	tombs map[string]tombstone
	// far holds the times of the records whose UpdatedAt is outside what
	// a record's time can hold (before 1678 or after 2262: a fake
	// clock's); made on first use.
	far map[string]time.Time
}

// A record is kept as one string: the time of its write (8 bytes,
// little-endian: nanoseconds since 1970 in UTC, or farTime when the time
// is in memKind.far), its version (uvarint), then its data.
func memRecord(version, at int64, data []byte) string {
	var head [8 + binary.MaxVarintLen64]byte
	binary.LittleEndian.PutUint64(head[:], uint64(at))
	n := 8 + binary.PutUvarint(head[8:], uint64(version))
	var b strings.Builder
	b.Grow(n + len(data)) // exactly: the string's allocation is the record's
	b.Write(head[:n])
	b.Write(data)
	return b.String()
}

// memVersion is a kept record's version (0 for "": no record).
func memVersion(r string) int64 {
	if r == "" {
		return 0
	}
	v, _ := uvarintString(r[8:])
	return int64(v)
}

func uvarintString(s string) (uint64, int) {
	var v uint64
	for i := 0; i < len(s) && i < binary.MaxVarintLen64; i++ {
		c := s[i]
		v |= uint64(c&0x7f) << (7 * i)
		if c < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0 // not reached: the store wrote it
}

type tombstone struct {
	version   int64
	deletedAt time.Time
}

// farTime marks a record whose time is kept in memKind.far.
const farTime int64 = math.MinInt64

var (
	_ Store           = (*Memory)(nil)
	_ TombstonePurger = (*Memory)(nil)
)

// NewMemory returns an empty in-memory store.
func NewMemory(opts MemoryOptions) *Memory {
	return &Memory{clock: clock.OrReal(opts.Clock), kinds: make(map[string]*memKind)}
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
	k := m.kinds[kind]
	if k == nil {
		return Record{}, notFound(kind, id)
	}
	r, ok := k.recs[id]
	if !ok {
		return Record{}, notFound(kind, id)
	}
	return k.record(kind, id, r), nil
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
	k := m.kinds[kind]
	if k == nil || len(k.recs) == 0 {
		return nil, nil
	}
	out := make([]Record, 0, len(k.recs))
	for id, r := range k.recs {
		out = append(out, k.record(kind, id, r))
	}
	slices.SortFunc(out, func(a, b Record) int { return strings.Compare(a.ID, b.ID) })
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
		var actual int64
		if k := m.kinds[op.Kind]; k != nil {
			actual = memVersion(k.recs[op.ID])
		}
		if actual != op.ExpectVersion {
			return nil, &ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: actual}
		}
	}
	now := m.clock.Now().UTC().Round(0) // Round(0) drops the monotonic reading
	at := farTime
	if y := now.Year(); y > 1678 && y < 2262 {
		at = now.UnixNano()
	}
	out := make([]Record, len(ops))
	for i, op := range ops {
		k := m.kinds[op.Kind]
		if k == nil {
			k = &memKind{recs: make(map[string]string)}
			m.kinds[op.Kind] = k
		}
		if op.Delete {
			delete(k.recs, op.ID)
			delete(k.far, op.ID)
			if k.tombs == nil {
				k.tombs = make(map[string]tombstone)
			}
			k.tombs[op.ID] = tombstone{version: op.ExpectVersion, deletedAt: now}
			out[i] = Record{Kind: op.Kind, ID: op.ID, UpdatedAt: now}
			continue
		}
		version := op.ExpectVersion + 1
		if op.ExpectVersion == 0 && k.tombs != nil {
			version = k.tombs[op.ID].version + 1
			delete(k.tombs, op.ID)
		}
		k.recs[op.ID] = memRecord(version, at, op.Data)
		if at == farTime {
			if k.far == nil {
				k.far = make(map[string]time.Time)
			}
			k.far[op.ID] = now
		} else if k.far != nil {
			delete(k.far, op.ID)
		}
		out[i] = Record{Kind: op.Kind, ID: op.ID, Version: version, Data: cloneData(op.Data), UpdatedAt: now}
	}
	return out, nil
}

// record is r as the Record the store returns, with its own copy of the
// data.
func (k *memKind) record(kind, id string, r string) Record {
	var at int64
	for i := 7; i >= 0; i-- {
		at = at<<8 | int64(r[i])
	}
	version, n := uvarintString(r[8:])
	data := make([]byte, len(r)-8-n)
	copy(data, r[8+n:])
	var t time.Time
	if at == farTime {
		t = k.far[id]
	} else {
		t = time.Unix(0, at).UTC()
	}
	return Record{Kind: kind, ID: id, Version: int64(version), Data: data, UpdatedAt: t}
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
	for _, k := range m.kinds {
		for id, ts := range k.tombs {
			if ts.deletedAt.Before(deletedBefore) {
				delete(k.tombs, id)
				purged++
			}
		}
	}
	return purged, nil
}

// Close implements Store. It drops every record and tombstone.
func (m *Memory) Close() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.closed = true
	m.kinds = nil
	return nil
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
