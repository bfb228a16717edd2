package storetest

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

// Run runs every conformance check as a subtest of t. open is called once
// per subtest and must return a new, empty store; the suite closes it when
// the subtest ends (Close is idempotent, so open may register its own
// cleanup as well).
func Run(t *testing.T, open func(t *testing.T) store.Store) {
	t.Helper()
	for _, c := range cases() {
		t.Run(c.name, func(t *testing.T) {
			s := open(t)
			require.NotNil(t, s, "open returned a nil store")
			t.Cleanup(func() { _ = s.Close() })
			c.run(t, s)
		})
	}
}

type testCase struct {
	name string
	run  func(t *testing.T, s store.Store)
}

func cases() []testCase {
	var all []testCase
	all = append(all, basicCases()...)
	all = append(all, batchCases()...)
	all = append(all, tombstoneCases()...)
	all = append(all, isolationCases()...)
	all = append(all, lifecycleCases()...)
	all = append(all, concurrencyCases()...)
	all = append(all, groupCases()...)
	return all
}

func put(kind, id string, expect int64, data string) store.Op {
	return store.Op{Kind: kind, ID: id, ExpectVersion: expect, Data: []byte(data)}
}

func del(kind, id string, expect int64) store.Op {
	return store.Op{Kind: kind, ID: id, ExpectVersion: expect, Delete: true}
}

func mustApply(t *testing.T, s store.Store, ops ...store.Op) []store.Record {
	t.Helper()
	recs, err := s.Apply(t.Context(), ops...)
	require.NoError(t, err)
	require.Len(t, recs, len(ops), "Apply returns one record per op")
	return recs
}

func mustGet(t *testing.T, s store.Store, kind, id string) store.Record {
	t.Helper()
	r, err := s.Get(t.Context(), kind, id)
	require.NoError(t, err, "Get %s/%s", kind, id)
	return r
}

func assertMissing(t *testing.T, s store.Store, kind, id string) {
	t.Helper()
	_, err := s.Get(t.Context(), kind, id)
	assert.ErrorIs(t, err, store.ErrNotFound, "%s/%s should not exist", kind, id)
}

// assertRecord checks identity, version and data, and that UpdatedAt is set
// the way the contract says.
func assertRecord(t *testing.T, r store.Record, kind, id string, version int64, data string) {
	t.Helper()
	assert.Equal(t, kind, r.Kind)
	assert.Equal(t, id, r.ID)
	assert.Equal(t, version, r.Version, "version of %s/%s", kind, id)
	assert.Equal(t, data, string(r.Data), "data of %s/%s", kind, id)
	assert.False(t, r.UpdatedAt.IsZero(), "UpdatedAt of %s/%s is set", kind, id)
	assert.Equal(t, time.UTC, r.UpdatedAt.Location(), "UpdatedAt is in UTC")
}

// assertSameRecord compares two reads of one version (time with Equal, so
// that representation details do not matter).
func assertSameRecord(t *testing.T, want, got store.Record) {
	t.Helper()
	assert.Equal(t, want.Kind, got.Kind)
	assert.Equal(t, want.ID, got.ID)
	assert.Equal(t, want.Version, got.Version)
	assert.Equal(t, string(want.Data), string(got.Data))
	assert.True(t, want.UpdatedAt.Equal(got.UpdatedAt), "UpdatedAt %v != %v", want.UpdatedAt, got.UpdatedAt)
}

func requireConflict(t *testing.T, err error, kind, id string, expected, actual int64) {
	t.Helper()
	require.Error(t, err)
	assert.ErrorIs(t, err, store.ErrConflict)
	var ce *store.ConflictError
	require.True(t, errors.As(err, &ce), "error %v is a *store.ConflictError", err)
	assert.Equal(t, store.ConflictError{Kind: kind, ID: id, Expected: expected, Actual: actual}, *ce)
}

func cancelledContext(t *testing.T) context.Context {
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	return ctx
}
