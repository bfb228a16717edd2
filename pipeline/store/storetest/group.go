package storetest

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/store"
)

// groupCases check what a store that shares one commit between concurrent
// callers (group commit) must still guarantee: each caller gets its own
// outcome, a conflict undoes the conflicting caller's ops and nobody
// else's, and a caller that gives up mid-batch has all of its ops written
// or none. A store without group commit passes them trivially.
func groupCases() []testCase {
	return []testCase{
		{"ConcurrentCallersOneConflicts", concurrentCallersOneConflicts},
		{"CancelledCallersAllOrNone", cancelledCallersAllOrNone},
	}
}

// concurrentCallersOneConflicts releases, in every round, several callers
// that write two records of their own, together with two rivals that both
// create the same record (each with a record of its own as well) and one
// caller whose second op expects a wrong version. Every plain caller must
// succeed; exactly one rival wins; the losers get a conflict naming their
// op and have nothing of their batch written, although their first op was
// valid.
func concurrentCallersOneConflicts(t *testing.T, s store.Store) {
	const rounds, plain = 12, 8
	mustApply(t, s, put("fixed", "x", 0, "x1"))
	for round := range rounds {
		v := int64(round) // the version each plain caller's records have
		start := make(chan struct{})
		var wg sync.WaitGroup
		plainErrs := make([]error, plain)
		plainRecs := make([][]store.Record, plain)
		for c := range plain {
			wg.Go(func() {
				<-start
				data := fmt.Sprintf("round %d caller %d", round, c)
				plainRecs[c], plainErrs[c] = s.Apply(t.Context(),
					put("plain", fmt.Sprintf("c%d-a", c), v, data), put("plain", fmt.Sprintf("c%d-b", c), v, data))
			})
		}
		contested := "contested-" + strconv.Itoa(round)
		rivalErrs := make([]error, 2)
		for c := range rivalErrs {
			wg.Go(func() {
				<-start
				_, rivalErrs[c] = s.Apply(t.Context(),
					put("own", fmt.Sprintf("r%d-rival%d", round, c), 0, "mine"), put("contested", contested, 0, strconv.Itoa(c)))
			})
		}
		var staleErr error
		wg.Go(func() {
			<-start
			_, staleErr = s.Apply(t.Context(), put("own", fmt.Sprintf("r%d-stale", round), 0, "mine"), put("fixed", "x", 7, "stale"))
		})
		close(start)
		wg.Wait()

		for c := range plain {
			require.NoError(t, plainErrs[c], "round %d: plain caller %d", round, c)
			require.Len(t, plainRecs[c], 2)
			data := fmt.Sprintf("round %d caller %d", round, c)
			assertRecord(t, plainRecs[c][0], "plain", fmt.Sprintf("c%d-a", c), v+1, data)
			assertRecord(t, plainRecs[c][1], "plain", fmt.Sprintf("c%d-b", c), v+1, data)
			assertRecord(t, mustGet(t, s, "plain", fmt.Sprintf("c%d-a", c)), "plain", fmt.Sprintf("c%d-a", c), v+1, data)
			assertRecord(t, mustGet(t, s, "plain", fmt.Sprintf("c%d-b", c)), "plain", fmt.Sprintf("c%d-b", c), v+1, data)
		}

		requireConflict(t, staleErr, "fixed", "x", 7, 1)
		assertMissing(t, s, "own", fmt.Sprintf("r%d-stale", round))
		assertRecord(t, mustGet(t, s, "fixed", "x"), "fixed", "x", 1, "x1")

		winners := 0
		for c, err := range rivalErrs {
			own := fmt.Sprintf("r%d-rival%d", round, c)
			if err == nil {
				winners++
				assertRecord(t, mustGet(t, s, "own", own), "own", own, 1, "mine")
				assertRecord(t, mustGet(t, s, "contested", contested), "contested", contested, 1, strconv.Itoa(c))
				continue
			}
			requireConflict(t, err, "contested", contested, 0, 1)
			assertMissing(t, s, "own", own)
		}
		require.Equal(t, 1, winners, "round %d: exactly one rival wins", round)
	}
}

// cancelledCallersAllOrNone has callers write pairs of records while their
// contexts are cancelled at varying moments, as a caller that gives up
// mid-Apply would: an Apply that returned nil wrote both records; one that
// failed with its context's error wrote both or neither, never one. Each
// caller then reads back which it was and carries on from there.
func cancelledCallersAllOrNone(t *testing.T, s store.Store) {
	const callers, writes = 12, 25
	var wg sync.WaitGroup
	for c := range callers {
		wg.Go(func() {
			a, b := fmt.Sprintf("c%d-a", c), fmt.Sprintf("c%d-b", c)
			var v int64 // the version both records have
			for n := range writes {
				ctx, cancel := context.WithCancel(t.Context())
				cancelled := make(chan struct{})
				go func() {
					defer close(cancelled)
					for range (c + n) % 4 { // cancel before, during or after
						runtime.Gosched()
					}
					cancel()
				}()
				data := strconv.FormatInt(v+1, 10)
				_, err := s.Apply(ctx, put("pair", a, v, data), put("pair", b, v, data))
				<-cancelled
				switch {
				case err == nil:
					v++
				case errors.Is(err, context.Canceled):
					got := pairVersion(t, s, a, b)
					if !assert.Contains(t, []int64{v, v + 1}, got, "caller %d: a cancelled Apply writes all or nothing", c) {
						return
					}
					v = got
				default:
					assert.NoError(t, err, "caller %d: only the context may fail the Apply", c)
					return
				}
				if v > 0 && pairVersion(t, s, a, b) != v {
					assert.Fail(t, "the pair is not where the caller's outcome says", "caller %d write %d", c, n)
					return
				}
			}
		})
	}
	wg.Wait()
}

// pairVersion reads two records written together and fails the test when
// they are not at one version (0: neither exists).
func pairVersion(t *testing.T, s store.Store, a, b string) int64 {
	t.Helper()
	var versions [2]int64
	for i, id := range []string{a, b} {
		r, err := s.Get(t.Context(), "pair", id)
		switch {
		case errors.Is(err, store.ErrNotFound):
		case assert.NoError(t, err):
			versions[i] = r.Version
			assert.Equal(t, strconv.FormatInt(r.Version, 10), string(r.Data), "data of pair/%s", id)
		}
	}
	assert.Equal(t, versions[0], versions[1], "%s and %s were written in one Apply", a, b)
	return versions[0]
}
