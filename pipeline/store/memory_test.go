package store_test

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/store/storetest"
)

func TestMemoryConformance(t *testing.T) {
	storetest.Run(t, func(t *testing.T) store.Store {
		return store.NewMemory(store.MemoryOptions{})
	})
}

func TestMemoryUpdatedAtComesFromTheClock(t *testing.T) {
	start := time.Date(2026, 11, 3, 10, 0, 0, 0, time.FixedZone("CET", 3600))
	fake := clock.NewFake(start)
	s := store.NewMemory(store.MemoryOptions{Clock: fake})

	recs, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("1")})
	require.NoError(t, err)
	assert.Equal(t, start.UTC(), recs[0].UpdatedAt)

	fake.Advance(90 * time.Second)
	recs, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Data: []byte("2")})
	require.NoError(t, err)
	assert.Equal(t, start.Add(90*time.Second).UTC(), recs[0].UpdatedAt)

	got, err := s.Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, recs[0], got)
}

// A record keeps its time as nanoseconds since 1970 where that fits, and
// apart where it does not (a fake clock's year 1 or 3000): both read back
// exactly, by Get, List and after an update that moves it back in range.
func TestMemoryKeepsTimesOutsideTheNanosecondRange(t *testing.T) {
	tests := []struct {
		name string
		at   time.Time
	}{
		{"year 1", time.Time{}},
		{"year 1677", time.Date(1677, 1, 1, 0, 0, 0, 1, time.UTC)},
		{"in range", time.Date(2026, 11, 27, 17, 0, 0, 123456789, time.UTC)},
		{"year 2263", time.Date(2263, 1, 1, 0, 0, 0, 7, time.UTC)},
		{"year 3000", time.Date(3000, 6, 1, 12, 0, 0, 5, time.UTC)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			now := tc.at
			s := store.NewMemory(store.MemoryOptions{Clock: settable{clock.NewFake(now), &now}})
			recs, err := s.Apply(t.Context(), store.Op{Kind: "k", ID: "a", Data: []byte("1")}, store.Op{Kind: "k", ID: "b", Data: []byte("2")})
			require.NoError(t, err)
			assert.Equal(t, tc.at, recs[0].UpdatedAt)
			got, err := s.Get(t.Context(), "k", "a")
			require.NoError(t, err)
			assert.Equal(t, tc.at, got.UpdatedAt)
			list, err := s.List(t.Context(), "k")
			require.NoError(t, err)
			require.Len(t, list, 2)
			assert.Equal(t, tc.at, list[1].UpdatedAt)

			// An update at an ordinary time replaces the far one.
			now = time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
			_, err = s.Apply(t.Context(), store.Op{Kind: "k", ID: "a", ExpectVersion: 1, Data: []byte("3")})
			require.NoError(t, err)
			got, err = s.Get(t.Context(), "k", "a")
			require.NoError(t, err)
			assert.Equal(t, now, got.UpdatedAt)
			got, err = s.Get(t.Context(), "k", "b")
			require.NoError(t, err)
			assert.Equal(t, tc.at, got.UpdatedAt, "the other record keeps its time")
		})
	}
}

// A record costs the store little more than its data: 20,000 records of
// 100 bytes take less than 220 bytes each (112 of them the record's
// allocation). A record kept as a Record (kind, id, time.Time) in a map
// keyed by kind and id took 320.
func TestMemoryKeepsARecordInLittleMoreThanItsData(t *testing.T) {
	const n = 20000
	ids := make([]string, n)
	for i := range ids {
		ids[i] = fmt.Sprintf("r%05d", i)
	}
	data := make([]byte, 100)
	s := store.NewMemory(store.MemoryOptions{})
	before := liveHeap()
	for _, id := range ids {
		_, err := s.Apply(t.Context(), store.Op{Kind: "k", ID: id, Data: data})
		require.NoError(t, err)
	}
	perRecord := float64(liveHeap()-before) / n
	runtime.KeepAlive(s)
	runtime.KeepAlive(ids)
	t.Logf("%.0f bytes a record", perRecord)
	assert.Less(t, perRecord, 220.0, "bytes a record of 100 bytes")
}

// liveHeap is the heap allocated after a collection.
func liveHeap() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// settable is a clock whose Now is *now, also back in time.
type settable struct {
	clock.Clock
	now *time.Time
}

func (c settable) Now() time.Time { return *c.now }

func TestValidateOps(t *testing.T) {
	tests := []struct {
		name    string
		ops     []store.Op
		wantErr bool
	}{
		{"no ops", nil, false},
		{"create and update of different records", []store.Op{{Kind: "k", ID: "a"}, {Kind: "k", ID: "b", ExpectVersion: 3}}, false},
		{"same id in two kinds", []store.Op{{Kind: "k", ID: "a"}, {Kind: "j", ID: "a"}}, false},
		{"delete with a version", []store.Op{{Kind: "k", ID: "a", ExpectVersion: 1, Delete: true}}, false},
		{"empty kind", []store.Op{{ID: "a"}}, true},
		{"empty id", []store.Op{{Kind: "k"}}, true},
		{"negative version", []store.Op{{Kind: "k", ID: "a", ExpectVersion: -2}}, true},
		{"delete without a version", []store.Op{{Kind: "k", ID: "a", Delete: true}}, true},
		{"two ops on one record", []store.Op{{Kind: "k", ID: "a"}, {Kind: "k", ID: "b"}, {Kind: "k", ID: "a", ExpectVersion: 1}}, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			err := store.ValidateOps(tc.ops)
			if tc.wantErr {
				assert.ErrorIs(t, err, store.ErrInvalidOp)
			} else {
				assert.NoError(t, err)
			}
		})
	}
}

func TestConflictErrorMatchesErrConflict(t *testing.T) {
	err := error(&store.ConflictError{Kind: "item", ID: "a", Expected: 1, Actual: 2})
	assert.ErrorIs(t, err, store.ErrConflict)
	assert.NotErrorIs(t, err, store.ErrNotFound)
	assert.Equal(t, "store: version conflict on item/a: expected 1, found 2", err.Error())
}
