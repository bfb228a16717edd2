package storetest

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

func concurrencyCases() []testCase {
	return []testCase{
		{"RacingWritersOneWinnerPerVersion", racingWriters},
		{"ConcurrentIncrementsLoseNoUpdate", concurrentIncrements},
		{"ReadersNeverSeeHalfABatch", readersSeeWholeBatches},
		{"RacingRecreatesOneWinnerPerLife", racingRecreates},
		{"VersionsNeverRepeatUnderDeleteChurn", versionsNeverRepeat},
	}
}

// racingWriters releases several writers at once, all expecting the same
// version: exactly one may win, every other one must get a conflict that
// names the winner's version.
func racingWriters(t *testing.T, s store.Store) {
	const rounds, writers = 15, 6
	mustApply(t, s, put("item", "race", 0, "start"))
	for v := int64(1); v <= rounds; v++ {
		start := make(chan struct{})
		var wins, conflicts atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				<-start
				data := fmt.Sprintf("round %d writer %d", v, w)
				recs, err := s.Apply(t.Context(), put("item", "race", v, data))
				var ce *store.ConflictError
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(data)
					assert.Equal(t, v+1, recs[0].Version)
				case errors.As(err, &ce):
					conflicts.Add(1)
					assert.Equal(t, store.ConflictError{Kind: "item", ID: "race", Expected: v, Actual: v + 1}, *ce)
				default:
					assert.NoError(t, err, "a racing writer fails only with a conflict")
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "round %d: exactly one writer wins", v)
		require.Equal(t, int32(writers-1), conflicts.Load(), "round %d: every other writer conflicts", v)
		got := mustGet(t, s, "item", "race")
		require.Equal(t, v+1, got.Version)
		require.Equal(t, winner.Load(), string(got.Data), "the stored data is the winner's")
	}
}

// concurrentIncrements runs read-modify-write loops that retry on
// conflict: the final count proves that no increment was lost.
func concurrentIncrements(t *testing.T, s store.Store) {
	const workers, perWorker = 4, 20
	mustApply(t, s, put("counter", "c", 0, "0"))
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := 0; done < perWorker; {
				r, err := s.Get(t.Context(), "counter", "c")
				if !assert.NoError(t, err) {
					return
				}
				n, err := strconv.Atoi(string(r.Data))
				if !assert.NoError(t, err) {
					return
				}
				_, err = s.Apply(t.Context(), put("counter", "c", r.Version, strconv.Itoa(n+1)))
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				done++
			}
		})
	}
	wg.Wait()
	got := mustGet(t, s, "counter", "c")
	assert.Equal(t, strconv.Itoa(workers*perWorker), string(got.Data))
	assert.Equal(t, int64(workers*perWorker+1), got.Version)
}

// readersSeeWholeBatches writes two records in every Apply while readers
// list them: a reader must see both at the same version, never one ahead.
func readersSeeWholeBatches(t *testing.T, s store.Store) {
	const writes, readers = 60, 2
	mustApply(t, s, put("pair", "a", 0, "0"), put("pair", "b", 0, "0"))
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			var last int64
			for {
				select {
				case <-stop:
					return
				default:
				}
				list, err := s.List(t.Context(), "pair")
				if !assert.NoError(t, err) || !assert.Len(t, list, 2) {
					return
				}
				a, b := list[0], list[1]
				if !assert.Equal(t, a.Version, b.Version, "both records of a batch move together") ||
					!assert.Equal(t, string(a.Data), string(b.Data)) ||
					!assert.GreaterOrEqual(t, a.Version, last, "versions never go back") {
					return
				}
				last = a.Version
			}
		})
	}
	for v := int64(1); v <= writes; v++ {
		data := strconv.FormatInt(v, 10)
		if _, err := s.Apply(t.Context(), put("pair", "a", v, data), put("pair", "b", v, data)); err != nil {
			close(stop)
			wg.Wait()
			require.NoError(t, err)
		}
	}
	close(stop)
	wg.Wait()
}

// racingRecreates deletes a record and releases creators (expecting 0) and
// stale writers (expecting the deleted version) at once: exactly one
// creator wins, at the deleted version + 1, and everyone else conflicts.
func racingRecreates(t *testing.T, s store.Store) {
	const rounds, creators, stale = 10, 4, 2
	mustApply(t, s, put("item", "race", 0, "start"))
	for last := int64(1); last <= 2*rounds; last += 2 {
		mustApply(t, s, del("item", "race", last))
		start := make(chan struct{})
		var wins atomic.Int32
		var winner atomic.Value
		var wg sync.WaitGroup
		for w := range creators + stale {
			expect := int64(0)
			if w >= creators {
				expect = last
			}
			wg.Go(func() {
				<-start
				data := fmt.Sprintf("after %d writer %d", last, w)
				recs, err := s.Apply(t.Context(), put("item", "race", expect, data))
				var ce *store.ConflictError
				switch {
				case err == nil:
					wins.Add(1)
					winner.Store(data)
					assert.Zero(t, expect, "only a create may win")
					assert.Equal(t, last+1, recs[0].Version)
				case errors.As(err, &ce):
					if expect == 0 {
						assert.Equal(t, store.ConflictError{Kind: "item", ID: "race", Expected: 0, Actual: last + 1}, *ce)
					} else {
						assert.Contains(t, []int64{0, last + 1}, ce.Actual, "a stale writer sees the tombstone or the winner")
					}
				default:
					assert.NoError(t, err, "a racing writer fails only with a conflict")
				}
			})
		}
		close(start)
		wg.Wait()
		require.Equal(t, int32(1), wins.Load(), "after the delete at %d: exactly one creator wins", last)
		got := mustGet(t, s, "item", "race")
		require.Equal(t, last+1, got.Version)
		require.Equal(t, winner.Load(), string(got.Data))
		mustApply(t, s, put("item", "race", last+1, "updated"))
	}
}

// versionsNeverRepeat runs read-modify-write loops that create, update and
// delete one record, retrying on conflict. Every write that succeeds
// returns a version nobody else got, and together they are 1, 2, 3, ...
// with no gap: a delete keeps the version, the next create continues it.
func versionsNeverRepeat(t *testing.T, s store.Store) {
	const workers, perWorker = 4, 25
	var mu sync.Mutex
	seen := map[int64]int{} // version -> writes that returned it
	var wg sync.WaitGroup
	for range workers {
		wg.Go(func() {
			for done := 0; done < perWorker; {
				var op store.Op
				r, err := s.Get(t.Context(), "churn", "c")
				switch {
				case errors.Is(err, store.ErrNotFound):
					op = put("churn", "c", 0, "created")
				case !assert.NoError(t, err):
					return
				case r.Version%3 == 0:
					op = del("churn", "c", r.Version)
				default:
					op = put("churn", "c", r.Version, "updated")
				}
				recs, err := s.Apply(t.Context(), op)
				if errors.Is(err, store.ErrConflict) {
					continue
				}
				if !assert.NoError(t, err) {
					return
				}
				if !op.Delete {
					mu.Lock()
					seen[recs[0].Version]++
					mu.Unlock()
				}
				done++
			}
		})
	}
	wg.Wait()
	last := int64(len(seen))
	for v := int64(1); v <= last; v++ {
		assert.Equal(t, 1, seen[v], "writes that returned version %d", v)
	}
	if r, err := s.Get(t.Context(), "churn", "c"); err == nil {
		assert.Equal(t, last, r.Version, "the record holds the last version written")
	} else {
		require.ErrorIs(t, err, store.ErrNotFound)
		recs := mustApply(t, s, put("churn", "c", 0, "after"))
		assert.Equal(t, last+1, recs[0].Version, "the next create continues after the last version written")
	}
}
