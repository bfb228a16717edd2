package sqlitestore_test

import (
	"context"
	"database/sql"
	"fmt"
	"path/filepath"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// TestGroupCommitSharesOneCommit holds SQLite's write lock from another
// connection while 32 callers apply: the first one leads and waits at
// BEGIN, the other 31 queue behind it. Once the lock is released they must
// all be written in two commits, the leader's and one shared by the rest,
// each with its own result.
func TestGroupCommitSharesOneCommit(t *testing.T) {
	const callers = 32
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, sqlitestore.Options{})
	ctx := t.Context()
	for i := range callers {
		_, err := s.Apply(ctx, store.Op{Kind: "item", ID: fmt.Sprint(i), Data: []byte("v1")})
		require.NoError(t, err)
	}
	before := s.WriteStats()

	other, err := sql.Open("sqlite", sqlitestore.DSN(path, 5*time.Second, false))
	require.NoError(t, err)
	defer other.Close()
	lock, err := other.BeginTx(ctx, nil) // BEGIN IMMEDIATE: holds the write lock
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, `UPDATE foreman_schema SET version = version`)
	require.NoError(t, err)

	var wg sync.WaitGroup
	results := make([][]store.Record, callers)
	errs := make([]error, callers)
	apply := func(i int) {
		wg.Go(func() {
			results[i], errs[i] = s.Apply(ctx, store.Op{Kind: "item", ID: fmt.Sprint(i), ExpectVersion: 1, Data: []byte(fmt.Sprint("by ", i))})
		})
	}
	apply(0)
	deadline := time.Now().Add(4 * time.Second) // under the 5 s busy timeout
	for !s.Leading() || s.Queued() > 0 {        // the leader has taken its own request
		require.True(t, time.Now().Before(deadline), "the first caller did not take the lead")
		runtime.Gosched()
	}
	for i := 1; i < callers; i++ {
		apply(i)
	}
	for s.Queued() < callers-1 {
		require.True(t, time.Now().Before(deadline), "callers did not queue behind the leader: %d queued", s.Queued())
		runtime.Gosched()
	}
	require.NoError(t, lock.Rollback())
	wg.Wait()

	for i := range callers {
		require.NoError(t, errs[i], "caller %d", i)
		assert.Equal(t, int64(2), results[i][0].Version)
		assert.Equal(t, fmt.Sprint("by ", i), string(results[i][0].Data), "each caller gets its own record")
	}
	after := s.WriteStats()
	assert.Equal(t, int64(2), after.Commits-before.Commits, "the leader's commit, then one for the 31 queued")
	assert.Equal(t, int64(callers), after.Applies-before.Applies)
	assert.Equal(t, int64(callers), after.Ops-before.Ops)
}

// TestQueuedCallerCancelledLeavesTheQueue cancels callers while they wait
// behind a commit that cannot start: they return their context's error at
// once, nothing of theirs is written, and the callers still queued are
// committed.
func TestQueuedCallerCancelledLeavesTheQueue(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, sqlitestore.Options{})
	ctx := t.Context()
	other, err := sql.Open("sqlite", sqlitestore.DSN(path, 5*time.Second, false))
	require.NoError(t, err)
	defer other.Close()
	lock, err := other.BeginTx(ctx, nil)
	require.NoError(t, err)
	_, err = lock.ExecContext(ctx, `UPDATE foreman_schema SET version = version`)
	require.NoError(t, err)

	leaderDone := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, store.Op{Kind: "item", ID: "leader", Data: []byte("x")})
		leaderDone <- err
	}()
	deadline := time.Now().Add(4 * time.Second) // under the 5 s busy timeout
	for !s.Leading() || s.Queued() > 0 {        // the leader has taken its own request
		require.True(t, time.Now().Before(deadline), "the first caller did not take the lead")
		runtime.Gosched()
	}
	cctx, cancel := context.WithCancel(ctx)
	cancelled := make(chan error, 1)
	kept := make(chan error, 1)
	go func() {
		_, err := s.Apply(cctx, store.Op{Kind: "item", ID: "cancelled", Data: []byte("x")})
		cancelled <- err
	}()
	go func() {
		_, err := s.Apply(ctx, store.Op{Kind: "item", ID: "kept", Data: []byte("x")})
		kept <- err
	}()
	for s.Queued() < 2 {
		require.True(t, time.Now().Before(deadline), "callers did not queue")
		runtime.Gosched()
	}
	cancel()
	require.ErrorIs(t, <-cancelled, context.Canceled, "a queued caller returns when its context ends")
	require.NoError(t, lock.Rollback())
	require.NoError(t, <-leaderDone)
	require.NoError(t, <-kept)
	for id, want := range map[string]bool{"leader": true, "kept": true, "cancelled": false} {
		_, err := s.Get(ctx, "item", id)
		if want {
			assert.NoError(t, err, id)
		} else {
			assert.ErrorIs(t, err, store.ErrNotFound, id)
		}
	}
}
