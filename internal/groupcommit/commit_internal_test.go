package groupcommit

import (
	"context"
	"runtime"
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A leader drops the requests of its batch whose context has ended before
// it calls Commit, and answers them with that error. (Which side of the
// race a queued caller's cancellation lands on cannot be arranged from
// outside, so this drives the batch directly.)
func TestCommitDropsTheRequestsCancelledBeforeItStarts(t *testing.T) {
	var seen []int
	q, err := New(Config[int, int]{Commit: func(_ context.Context, batch []int) []Result[int] {
		seen = append(seen, batch...)
		out := make([]Result[int], len(batch))
		for i, n := range batch {
			out[i].Value = n * 10
		}
		return out
	}})
	require.NoError(t, err)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	var batch []*waiter[int, int]
	for n, ctx := range []context.Context{t.Context(), cancelled, t.Context()} {
		batch = append(batch, &waiter[int, int]{ctx: ctx, req: n, done: make(chan struct{}), taken: true})
	}
	waiters := slices.Clone(batch) // commit reuses batch
	q.commit(t.Context(), batch)
	assert.Equal(t, []int{0, 2}, seen)
	for n, w := range waiters {
		<-w.done
		if n == 1 {
			assert.ErrorIs(t, w.res.Err, context.Canceled)
			continue
		}
		assert.Equal(t, Result[int]{Value: n * 10}, w.res)
	}
}

// A caller handed the slot after its context ended does no work for
// others: it passes the slot to the next caller and returns at once,
// before that caller's batch is committed. Holding the queue's lock while
// the context ends and the slot is handed over makes the caller see both
// at once.
func TestACallerHandedTheSlotAfterItsContextEndedPassesItOn(t *testing.T) {
	entered, release := make(chan []int), make(chan struct{})
	q, err := New(Config[int, int]{Commit: func(_ context.Context, batch []int) []Result[int] {
		entered <- batch
		<-release
		return make([]Result[int], len(batch))
	}})
	require.NoError(t, err)
	q.slots = 1 // as if a leader were committing
	ctx, cancel := context.WithCancel(t.Context())
	cancelled, kept := make(chan error, 1), make(chan error, 1)
	go func() { _, err := q.Submit(ctx, 1); cancelled <- err }()
	waitFor(t, func() bool { return q.Queued() == 1 })
	go func() { _, err := q.Submit(t.Context(), 2); kept <- err }()
	waitFor(t, func() bool { return q.Queued() == 2 })

	q.mu.Lock()
	cancel()
	q.handOffLocked() // the leader is done: the slot goes to 1's caller
	q.mu.Unlock()

	assert.Equal(t, []int{2}, <-entered, "2's caller commits, handed the slot by 1's")
	select {
	case err := <-cancelled:
		require.ErrorIs(t, err, context.Canceled)
	case <-time.After(10 * time.Second): // a bound on a hang, not a wait for timing
		t.Fatal("the cancelled caller is still busy with the next batch")
	}
	close(release)
	require.NoError(t, <-kept)
	assert.Equal(t, 0, q.Leading())
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "condition never held")
		runtime.Gosched()
	}
}
