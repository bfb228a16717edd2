package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/groupcommit"
)

// heldCommits is a Commit that reports each batch it is given and commits
// it only when the test says so: every request n is answered with n*10, or
// with errOdd when n is odd and failOdd is set.
type heldCommits struct {
	entered chan commitCall
	failOdd bool
}

type commitCall struct {
	ctx     context.Context
	batch   []int
	release chan struct{}
}

var errOdd = errors.New("odd request")

func newHeld() *heldCommits { return &heldCommits{entered: make(chan commitCall)} }

func (h *heldCommits) commit(ctx context.Context, batch []int) []groupcommit.Result[int] {
	call := commitCall{ctx: ctx, batch: batch, release: make(chan struct{})}
	h.entered <- call
	<-call.release
	out := make([]groupcommit.Result[int], len(batch))
	for i, n := range batch {
		if h.failOdd && n%2 == 1 {
			out[i].Err = fmt.Errorf("request %d: %w", n, errOdd)
			continue
		}
		out[i].Value = n * 10
	}
	return out
}

func newQueue(t *testing.T, cfg groupcommit.Config[int, int]) *groupcommit.Queue[int, int] {
	t.Helper()
	q, err := groupcommit.New(cfg)
	require.NoError(t, err)
	return q
}

type outcome struct {
	value int
	err   error
}

// submit runs q.Submit in a goroutine of its own; its outcome arrives on
// the channel returned.
func submit(ctx context.Context, q *groupcommit.Queue[int, int], n int) <-chan outcome {
	out := make(chan outcome, 1)
	go func() {
		v, err := q.Submit(ctx, n)
		out <- outcome{v, err}
	}()
	return out
}

// waitUntil spins (no sleeping) until cond holds, or fails the test after
// a generous bound meant only to turn a hang into a failure.
func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		require.True(t, time.Now().Before(deadline), "waited too long for: %s", what)
		runtime.Gosched()
	}
}

func waitQueued(t *testing.T, q *groupcommit.Queue[int, int], n int) {
	t.Helper()
	waitUntil(t, fmt.Sprintf("%d queued", n), func() bool { return q.Queued() == n })
}

func TestNewRejectsABadConfig(t *testing.T) {
	commit := func(context.Context, []int) []groupcommit.Result[int] { return nil }
	for name, cfg := range map[string]groupcommit.Config[int, int]{
		"no commit":          {},
		"negative leaders":   {Commit: commit, Leaders: -1},
		"negative max batch": {Commit: commit, MaxBatch: -1},
		"negative weight":    {Commit: commit, MaxWeight: -1},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := groupcommit.New(cfg)
			require.ErrorIs(t, err, groupcommit.ErrInvalidConfig)
		})
	}
}

func TestALoneSubmitCommitsAtOnce(t *testing.T) {
	calls := 0
	q := newQueue(t, groupcommit.Config[int, int]{Commit: func(_ context.Context, batch []int) []groupcommit.Result[int] {
		calls++
		assert.Equal(t, []int{7}, batch)
		return []groupcommit.Result[int]{{Value: 70}}
	}})
	v, err := q.Submit(t.Context(), 7)
	require.NoError(t, err)
	assert.Equal(t, 70, v)
	assert.Equal(t, 1, calls)
	assert.Equal(t, 0, q.Leading(), "the slot is given back")
}

// Requests that queue while a batch commits go together in the next one,
// in queue order, and each caller gets its own result.
func TestRequestsQueuedDuringACommitShareTheNextOne(t *testing.T) {
	h := newHeld()
	h.failOdd = true
	q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit})
	first := submit(t.Context(), q, 0)
	call := <-h.entered
	assert.Equal(t, []int{0}, call.batch)

	var outs []<-chan outcome
	for n := 1; n <= 4; n++ {
		outs = append(outs, submit(t.Context(), q, n))
		waitQueued(t, q, n) // one at a time, so that the order is known
	}
	close(call.release)
	require.Equal(t, outcome{0, nil}, <-first)
	next := <-h.entered
	assert.Equal(t, []int{1, 2, 3, 4}, next.batch)
	close(next.release)
	for i, out := range outs {
		n := i + 1
		got := <-out
		if n%2 == 1 {
			require.ErrorIs(t, got.err, errOdd, "request %d", n)
		} else {
			require.NoError(t, got.err, "request %d", n)
			assert.Equal(t, n*10, got.value)
		}
	}
	assert.Equal(t, 0, q.Leading())
}

// A request still queued when its caller's context ends is withdrawn: the
// caller returns its context's error at once and the request is never
// committed.
func TestAQueuedRequestWithdrawsWhenItsContextEnds(t *testing.T) {
	h := newHeld()
	q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit})
	first := submit(t.Context(), q, 0)
	call := <-h.entered

	ctx, cancel := context.WithCancel(t.Context())
	withdrawn := submit(ctx, q, 1)
	waitQueued(t, q, 1)
	kept := submit(t.Context(), q, 2)
	waitQueued(t, q, 2)
	cancel()
	got := <-withdrawn // while the first commit still holds the slot
	require.ErrorIs(t, got.err, context.Canceled)
	assert.Equal(t, 1, q.Queued())

	close(call.release)
	<-first
	next := <-h.entered
	assert.Equal(t, []int{2}, next.batch, "the withdrawn request is not committed")
	close(next.release)
	assert.Equal(t, outcome{20, nil}, <-kept)
}

// A caller whose context ends while its batch commits, the leader's own
// included, waits for the outcome and is told the truth; the commit's
// context is not cancelled by it, and carries the leader's values.
func TestACallerWaitsForItsCommitWhateverItsContextSays(t *testing.T) {
	type key struct{}
	h := newHeld()
	q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit})
	leaderCtx, cancelLeader := context.WithCancel(context.WithValue(t.Context(), key{}, "leader"))
	leader := submit(leaderCtx, q, 0)
	call := <-h.entered

	followerCtx, cancelFollower := context.WithCancel(t.Context())
	follower := submit(followerCtx, q, 1)
	waitQueued(t, q, 1)
	cancelLeader()
	close(call.release)
	next := <-h.entered // the follower's batch, committing
	assert.Equal(t, []int{1}, next.batch)
	cancelFollower()
	assert.NoError(t, call.ctx.Err(), "the leader's cancellation does not reach the commit")
	assert.Equal(t, "leader", call.ctx.Value(key{}))
	assert.NoError(t, next.ctx.Err())
	close(next.release)

	assert.Equal(t, outcome{0, nil}, <-leader, "committed while its context ended: told so")
	assert.Equal(t, outcome{10, nil}, <-follower)
}

// A request whose context ends before its batch starts is never committed
// and its caller gets the context's error, whether it was still queued
// then (it withdraws) or already taken into a batch (the leader drops it).
func TestARequestCancelledBeforeItsBatchIsNotCommitted(t *testing.T) {
	for range 20 { // either side of the race
		h := newHeld()
		q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit})
		first := submit(t.Context(), q, 0)
		call := <-h.entered
		kept := submit(t.Context(), q, 2)
		waitQueued(t, q, 1)
		ctx, cancel := context.WithCancel(t.Context())
		dropped := submit(ctx, q, 1)
		waitQueued(t, q, 2)
		cancel()
		close(call.release) // the slot goes to 2's caller, which may take 2 and 1
		<-first
		next := <-h.entered
		assert.Equal(t, []int{2}, next.batch)
		close(next.release)
		require.ErrorIs(t, (<-dropped).err, context.Canceled)
		assert.Equal(t, outcome{20, nil}, <-kept)
	}
}

// A caller whose context ended while queued returns at once, whether it
// withdrew before the slot reached it or was handed the slot and passed it
// on (which of the two is a race here; commit_internal_test.go arranges
// the second), before the next caller's batch is committed.
func TestACancelledCallerPassesTheSlotOn(t *testing.T) {
	for range 20 {
		h := newHeld()
		q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit})
		first := submit(t.Context(), q, 0)
		call := <-h.entered
		ctx, cancel := context.WithCancel(t.Context())
		cancelled := submit(ctx, q, 1)
		waitQueued(t, q, 1)
		kept := submit(t.Context(), q, 2)
		waitQueued(t, q, 2)
		cancel()
		close(call.release)
		<-first
		next := <-h.entered
		assert.Equal(t, []int{2}, next.batch)
		require.ErrorIs(t, (<-cancelled).err, context.Canceled, "returned while the next batch commits")
		close(next.release)
		assert.Equal(t, outcome{20, nil}, <-kept)
		assert.Equal(t, 0, q.Leading())
	}
}

// MaxBatch and MaxWeight cut batches from the head of the queue; a request
// heavier than MaxWeight goes alone.
func TestBatchLimits(t *testing.T) {
	for _, tt := range []struct {
		name      string
		cfg       groupcommit.Config[int, int]
		queued    []int
		wantNexts [][]int
	}{
		{"max batch", groupcommit.Config[int, int]{MaxBatch: 2}, []int{1, 2, 3, 4, 5}, [][]int{{1, 2}, {3, 4}, {5}}},
		{"max weight", groupcommit.Config[int, int]{Weight: func(n int) int { return n }, MaxWeight: 5},
			[]int{1, 2, 9, 3, 2, 1}, [][]int{{1, 2}, {9}, {3, 2}, {1}}},
		{"both", groupcommit.Config[int, int]{MaxBatch: 2, Weight: func(n int) int { return n }, MaxWeight: 5},
			[]int{1, 1, 1, 4, 1}, [][]int{{1, 1}, {1, 4}, {1}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newHeld()
			tt.cfg.Commit = h.commit
			q := newQueue(t, tt.cfg)
			first := submit(t.Context(), q, 0)
			call := <-h.entered
			var outs []<-chan outcome
			for i, n := range tt.queued {
				outs = append(outs, submit(t.Context(), q, n))
				waitQueued(t, q, i+1)
			}
			close(call.release)
			<-first
			for _, want := range tt.wantNexts {
				next := <-h.entered
				assert.Equal(t, want, next.batch)
				close(next.release)
			}
			for i, out := range outs {
				assert.Equal(t, outcome{tt.queued[i] * 10, nil}, <-out)
			}
			assert.Equal(t, 0, q.Leading())
		})
	}
}

// With two leaders, two batches commit at once; a third caller queues.
func TestLeadersBoundTheCommitsInFlight(t *testing.T) {
	h := newHeld()
	q := newQueue(t, groupcommit.Config[int, int]{Commit: h.commit, Leaders: 2})
	a := submit(t.Context(), q, 1)
	ca := <-h.entered
	b := submit(t.Context(), q, 2)
	cb := <-h.entered
	assert.Equal(t, 2, q.Leading())
	c := submit(t.Context(), q, 3)
	waitQueued(t, q, 1)
	close(cb.release)
	cc := <-h.entered
	assert.Equal(t, []int{3}, cc.batch)
	close(cc.release)
	close(ca.release)
	for want, out := range map[int]<-chan outcome{10: a, 20: b, 30: c} {
		assert.Equal(t, outcome{want, nil}, <-out)
	}
	assert.Equal(t, 0, q.Leading())
}

// A Commit that panics fails its batch with ErrCommitPanicked, the panic
// goes on up the leader's Submit, and the queue keeps working.
func TestACommitThatPanicsFailsItsBatchAndTheQueueGoesOn(t *testing.T) {
	for name, bad := range map[string]func() []groupcommit.Result[int]{
		"panic":         func() []groupcommit.Result[int] { panic("boom") },
		"short results": func() []groupcommit.Result[int] { return nil },
	} {
		t.Run(name, func(t *testing.T) {
			h := newHeld()
			var mu sync.Mutex
			misbehave := false
			q := newQueue(t, groupcommit.Config[int, int]{Commit: func(ctx context.Context, batch []int) []groupcommit.Result[int] {
				mu.Lock()
				m := misbehave
				mu.Unlock()
				if m {
					return bad()
				}
				return h.commit(ctx, batch)
			}})
			first := submit(t.Context(), q, 0)
			call := <-h.entered
			panicked := make(chan any, 1)
			leaderOut := make(chan outcome, 1)
			go func() {
				defer func() { panicked <- recover() }()
				v, err := q.Submit(t.Context(), 1)
				leaderOut <- outcome{v, err}
			}()
			waitQueued(t, q, 1)
			follower := submit(t.Context(), q, 2)
			waitQueued(t, q, 2)
			mu.Lock()
			misbehave = true
			mu.Unlock()
			close(call.release)
			<-first
			assert.NotNil(t, <-panicked, "the panic reaches the leader's caller")
			assert.Empty(t, leaderOut)
			require.ErrorIs(t, (<-follower).err, groupcommit.ErrCommitPanicked)
			assert.Equal(t, 0, q.Leading())
			assert.Equal(t, 0, q.Queued())

			mu.Lock()
			misbehave = false
			mu.Unlock()
			after := submit(t.Context(), q, 3)
			c := <-h.entered
			close(c.release)
			assert.Equal(t, outcome{30, nil}, <-after)
		})
	}
}

// After a panic, the slot goes on to the next caller, which commits.
func TestAfterAPanicTheSlotGoesToTheNextCaller(t *testing.T) {
	h := newHeld()
	var mu sync.Mutex
	var seen []int
	q := newQueue(t, groupcommit.Config[int, int]{MaxBatch: 1, Commit: func(ctx context.Context, batch []int) []groupcommit.Result[int] {
		mu.Lock()
		seen = append(seen, batch...)
		mu.Unlock()
		if batch[0] == 1 {
			panic("boom")
		}
		return h.commit(ctx, batch)
	}})
	first := submit(t.Context(), q, 0)
	call := <-h.entered
	panicked := make(chan any, 1)
	go func() {
		defer func() { panicked <- recover() }()
		_, _ = q.Submit(t.Context(), 1)
	}()
	waitQueued(t, q, 1)
	second := submit(t.Context(), q, 2)
	waitQueued(t, q, 2)
	close(call.release)
	<-first
	assert.NotNil(t, <-panicked)
	c := <-h.entered
	assert.Equal(t, []int{2}, c.batch)
	close(c.release)
	assert.Equal(t, outcome{20, nil}, <-second)
	assert.Equal(t, 0, q.Leading())
	assert.Equal(t, 0, q.Queued())
	mu.Lock()
	defer mu.Unlock()
	assert.Equal(t, []int{0, 1, 2}, seen)
}
