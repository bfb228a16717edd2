package groupcommit

import (
	"context"
	"slices"
	"testing"

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
