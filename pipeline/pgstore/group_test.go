package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// heldWriter makes the store's first group commit wait until the test
// releases it, so that the Applies that arrive meanwhile queue up.
type heldWriter struct {
	entered, release chan struct{}
	once             sync.Once
}

func holdFirstWrite(s *pgstore.Store) *heldWriter {
	h := &heldWriter{entered: make(chan struct{}), release: make(chan struct{})}
	s.SetBeforeWrite(func(int) {
		h.once.Do(func() {
			close(h.entered)
			<-h.release
		})
	})
	return h
}

func waitQueued(t *testing.T, s *pgstore.Store, n int) {
	t.Helper()
	require.Eventually(t, func() bool { return s.Queued() == n }, 30*time.Second, time.Millisecond,
		"%d Applies should be waiting for the group commit", n)
}

// Applies that arrive while a group commit is being written go together in
// the next one, and each gets its own outcome: a conflict or a fence in
// one of them rolls back that one only.
func TestGroupCommitCarriesQueuedAppliesWithTheirOwnOutcomes(t *testing.T) {
	s := openStore(t, pgstore.Options{Writers: 1})
	_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "taken", Data: []byte("v1")}, store.Op{Kind: "item", ID: "fixed"})
	require.NoError(t, err)
	stale, err := s.Fenced("coordinator", 5)
	require.NoError(t, err)

	hold := holdFirstWrite(s)
	firstDone := make(chan error, 1)
	go func() {
		_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "first"})
		firstDone <- err
	}()
	<-hold.entered

	type outcome struct {
		recs []store.Record
		err  error
	}
	applies := []func() ([]store.Record, error){
		func() ([]store.Record, error) {
			return s.Apply(t.Context(), store.Op{Kind: "item", ID: "ok-1", Data: []byte("1")})
		},
		func() ([]store.Record, error) {
			return s.Apply(t.Context(), store.Op{Kind: "item", ID: "half"}, store.Op{Kind: "item", ID: "fixed", ExpectVersion: 3})
		},
		func() ([]store.Record, error) {
			return s.Apply(t.Context(), store.Op{Kind: "item", ID: "ok-2"}, store.Op{Kind: "task", ID: "ok-2"})
		},
		func() ([]store.Record, error) { return stale.Apply(t.Context(), store.Op{Kind: "item", ID: "fenced"}) },
		func() ([]store.Record, error) {
			return s.Apply(t.Context(), store.Op{Kind: "item", ID: "taken", ExpectVersion: 1, Data: []byte("v2")})
		},
	}
	outcomes := make([]outcome, len(applies))
	var wg sync.WaitGroup
	for i, apply := range applies {
		wg.Go(func() {
			recs, err := apply()
			outcomes[i] = outcome{recs, err}
		})
	}
	waitQueued(t, s, len(applies))
	close(hold.release)
	wg.Wait()
	require.NoError(t, <-firstDone)

	stats := s.Stats()
	assert.Equal(t, pgstore.Stats{Applies: 1 + 1 + int64(len(applies)), GroupCommits: 3, LargestGroup: int64(len(applies))}, stats,
		"the setup Apply, the held one, then all the queued ones in one group commit")

	require.NoError(t, outcomes[0].err)
	assert.Equal(t, int64(1), outcomes[0].recs[0].Version)
	var ce *store.ConflictError
	require.ErrorAs(t, outcomes[1].err, &ce)
	assert.Equal(t, store.ConflictError{Kind: "item", ID: "fixed", Expected: 3, Actual: 1}, *ce)
	require.NoError(t, outcomes[2].err)
	assert.Len(t, outcomes[2].recs, 2)
	var fe *pgstore.FencedError
	require.ErrorAs(t, outcomes[3].err, &fe)
	assert.Equal(t, pgstore.FencedError{Lease: "coordinator", Term: 5, Current: 0}, *fe)
	require.NoError(t, outcomes[4].err)
	assert.Equal(t, int64(2), outcomes[4].recs[0].Version)

	for _, missing := range []string{"half", "fenced"} {
		_, err := s.Get(t.Context(), "item", missing)
		assert.ErrorIs(t, err, store.ErrNotFound, "%s belongs to a rolled-back Apply", missing)
	}
	for _, present := range []string{"first", "ok-1", "ok-2"} {
		_, err := s.Get(t.Context(), "item", present)
		assert.NoError(t, err, present)
	}
	got, err := s.Get(t.Context(), "item", "taken")
	require.NoError(t, err)
	assert.Equal(t, "v2", string(got.Data))
}

// An Apply still waiting in the queue when its context ends is withdrawn:
// it returns the context's error and is never written.
func TestQueuedApplyWithdrawsWhenItsContextEnds(t *testing.T) {
	s := openStore(t, pgstore.Options{Writers: 1})
	hold := holdFirstWrite(s)
	go func() { _, _ = s.Apply(t.Context(), store.Op{Kind: "item", ID: "first"}) }()
	<-hold.entered

	ctx, cancel := context.WithCancel(t.Context())
	withdrawn := make(chan error, 1)
	go func() {
		_, err := s.Apply(ctx, store.Op{Kind: "item", ID: "withdrawn"})
		withdrawn <- err
	}()
	waitQueued(t, s, 1)
	cancel()
	require.ErrorIs(t, <-withdrawn, context.Canceled)
	assert.Equal(t, 0, s.Queued())
	close(hold.release)

	_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "after"})
	require.NoError(t, err)
	_, err = s.Get(t.Context(), "item", "withdrawn")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Get(t.Context(), "item", "first")
	assert.NoError(t, err)
}

// When the database refuses a group commit as a whole (here a constraint
// the host added breaks one Apply), each Apply of it is retried alone: the
// others land and only the bad one fails, with the database's reason.
func TestRefusedGroupCommitFallsBackToEachApplyAlone(t *testing.T) {
	s := openStore(t, pgstore.Options{Writers: 1})
	rawExec(t, `ALTER TABLE `+pgx.Identifier{s.Schema()}.Sanitize()+`.records ADD CONSTRAINT no_poison CHECK (id <> 'poison')`)
	t.Cleanup(func() {
		rawExec(t, `ALTER TABLE `+pgx.Identifier{s.Schema()}.Sanitize()+`.records DROP CONSTRAINT no_poison`)
	})
	hold := holdFirstWrite(s)
	go func() { _, _ = s.Apply(t.Context(), store.Op{Kind: "item", ID: "first"}) }()
	<-hold.entered

	ids := []string{"good-1", "poison", "good-2"}
	errs := make([]error, len(ids))
	var wg sync.WaitGroup
	for i, id := range ids {
		wg.Go(func() { _, errs[i] = s.Apply(t.Context(), store.Op{Kind: "item", ID: id}) })
	}
	waitQueued(t, s, len(ids))
	close(hold.release)
	wg.Wait()

	assert.NoError(t, errs[0])
	assert.ErrorContains(t, errs[1], "no_poison")
	assert.False(t, errors.Is(errs[1], store.ErrConflict))
	assert.NoError(t, errs[2])
	assert.Equal(t, int64(3), s.Stats().LargestGroup)
	list, err := s.List(t.Context(), "item")
	require.NoError(t, err)
	var got []string
	for _, r := range list {
		got = append(got, r.ID)
	}
	assert.Equal(t, []string{"first", "good-1", "good-2"}, got)
}

// Many writers at once, several group commits in flight: every Apply is
// written exactly once and the groups are larger than one.
func TestManyConcurrentAppliesShareGroupCommits(t *testing.T) {
	const writers, each = 32, 20
	s := openStore(t, pgstore.Options{Writers: 2})
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: fmt.Sprintf("w%02d-%02d", w, i)})
				if !assert.NoError(t, err) {
					return
				}
			}
		})
	}
	wg.Wait()
	list, err := s.List(t.Context(), "item")
	require.NoError(t, err)
	assert.Len(t, list, writers*each)
	st := s.Stats()
	assert.Equal(t, int64(writers*each), st.Applies)
	assert.Less(t, st.GroupCommits, st.Applies, "some Applies shared a group commit")
	t.Logf("%d applies in %d group commits (largest %d)", st.Applies, st.GroupCommits, st.LargestGroup)
}

// Many writers, several group commits in flight, small groups (so the
// queue often outgrows one), and callers that give up at random moments:
// nothing stalls, every Apply that returned without error is written, and
// every one that returned its context's error is not.
func TestGroupCommitUnderChurnNeverStallsOrLies(t *testing.T) {
	const writers, each = 24, 25
	s := openStore(t, pgstore.Options{Writers: 3, MaxBatch: 4})
	type result struct {
		id  string
		err error
	}
	results := make(chan result, writers*each)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("w%02d-%02d", w, i)
				ctx, cancel := context.WithCancel(t.Context())
				if i%3 == 0 {
					go cancel() // races the Apply: queued, in flight or done
				}
				_, err := s.Apply(ctx, store.Op{Kind: "item", ID: id})
				cancel()
				results <- result{id, err}
			}
		})
	}
	wg.Wait()
	close(results)
	written, withdrawn := 0, 0
	for r := range results {
		_, getErr := s.Get(t.Context(), "item", r.id)
		switch {
		case r.err == nil:
			written++
			assert.NoError(t, getErr, "%s was acknowledged", r.id)
		case errors.Is(r.err, context.Canceled):
			withdrawn++
			assert.ErrorIs(t, getErr, store.ErrNotFound, "%s was withdrawn, yet written", r.id)
		default:
			t.Errorf("%s: %v", r.id, r.err)
		}
	}
	assert.Equal(t, writers*each, written+withdrawn)
	assert.Equal(t, 0, s.Queued())
	assert.Equal(t, 0, s.Writing(), "every writer slot was given back")
	t.Logf("%d written, %d withdrawn, %+v", written, withdrawn, s.Stats())
}
