package store_test

import (
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
