package pgstore_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

var leaseStart = time.Date(2026, 11, 3, 9, 0, 0, 0, time.UTC)

const testTTL = 10 * time.Second

// coordinators opens n stores on one schema, as n coordinator processes
// would.
func coordinators(t *testing.T, n int) []*pgstore.Store {
	t.Helper()
	schema := emptySchema(t)
	stores := make([]*pgstore.Store, n)
	for i := range stores {
		stores[i] = openStore(t, pgstore.Options{Schema: schema})
	}
	return stores
}

func lead(t *testing.T, s *pgstore.Store, holder string, c foreman.Clock) *pgstore.Leader {
	t.Helper()
	l, err := s.TryLead(t.Context(), pgstore.LeaseOptions{Holder: holder, TTL: testTTL, Clock: c})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Resign(context.Background()) })
	return l
}

func waitLost(t *testing.T, l *pgstore.Leader) {
	t.Helper()
	select {
	case <-l.Lost():
	case <-time.After(30 * time.Second): // a bound on a hang, not a timing assertion
		t.Fatalf("leader %s never noticed it lost the lease", l.Holder())
	}
}

func requireFenced(t *testing.T, err error, term, current int64) {
	t.Helper()
	require.ErrorIs(t, err, pgstore.ErrFenced)
	var fe *pgstore.FencedError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, pgstore.FencedError{Lease: "coordinator", Term: term, Current: current}, *fe)
}

// The scenario fencing exists for: a leader is paused (SIGSTOP, a long GC,
// a partition) past its lease, another takes over, and the old one wakes
// up and writes. Each coordinator has its own store and its own clock; the
// paused one's clock stands still.
func TestPausedLeaderWritesAreFenced(t *testing.T) {
	stores := coordinators(t, 2)
	clockA, clockB := foreman.NewFakeClock(leaseStart), foreman.NewFakeClock(leaseStart)
	a := lead(t, stores[0], "a", clockA)
	assert.Equal(t, int64(1), a.Term())
	recs, err := a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x", Data: []byte("by a")})
	require.NoError(t, err)

	_, err = stores[1].TryLead(t.Context(), pgstore.LeaseOptions{Holder: "b", TTL: testTTL, Clock: clockB})
	require.ErrorIs(t, err, pgstore.ErrLeaseHeld)
	var held *pgstore.LeaseHeldError
	require.ErrorAs(t, err, &held)
	assert.Equal(t, pgstore.LeaseHeldError{Lease: "coordinator", Holder: "a", Term: 1, ExpiresAt: leaseStart.Add(testTTL), Remaining: testTTL}, *held)

	clockB.Advance(testTTL) // a is paused: only b's time moves
	b := lead(t, stores[1], "b", clockB)
	assert.Equal(t, int64(2), b.Term())

	_, err = a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x", ExpectVersion: recs[0].Version, Data: []byte("stale a")})
	requireFenced(t, err, 1, 2)
	_, err = a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "new"})
	requireFenced(t, err, 1, 2)
	got, err := b.Store().Get(t.Context(), "item", "x")
	require.NoError(t, err)
	assert.Equal(t, "by a", string(got.Data), "the fenced write changed nothing")
	_, err = b.Store().Get(t.Context(), "item", "new")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = b.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x", ExpectVersion: got.Version, Data: []byte("by b")})
	require.NoError(t, err)

	// a wakes up: its clock jumps, its renewal finds term 2, and it stops.
	clockA.Advance(testTTL)
	waitLost(t, a)
	require.ErrorIs(t, a.Err(), pgstore.ErrLeadershipLost)
	_, err = a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "new"})
	require.ErrorIs(t, err, pgstore.ErrFenced)
	assert.Nil(t, b.Err(), "b still leads")
}

// A leader that dies stops renewing; a contender campaigning takes over
// once the lease has run out, and no sooner.
func TestFailoverWhenTheLeaderDies(t *testing.T) {
	stores := coordinators(t, 2)
	c := foreman.NewFakeClock(leaseStart)
	a := lead(t, stores[0], "a", c)
	a.Abandon() // crashed: no more renewals, no release

	type result struct {
		l   *pgstore.Leader
		err error
	}
	won := make(chan result, 1)
	go func() {
		l, err := stores[1].Campaign(t.Context(), pgstore.LeaseOptions{Holder: "b", TTL: testTTL, Clock: c})
		won <- result{l, err}
	}()
	var b *pgstore.Leader
	for b == nil {
		// Advance only once the campaign waits on the clock, and stop as soon
		// as it returns (its renewals arm timers too).
		blockCtx, cancel := context.WithCancel(t.Context())
		blocked := make(chan error, 1)
		go func() { blocked <- c.BlockUntil(blockCtx, 1) }()
		select {
		case r := <-won:
			cancel()
			require.NoError(t, r.err)
			b = r.l
		case err := <-blocked:
			cancel()
			require.NoError(t, err)
			select {
			case r := <-won:
				require.NoError(t, r.err)
				b = r.l
			default:
				next, ok := c.NextDeadline()
				require.True(t, ok)
				c.Set(next)
			}
		}
	}
	t.Cleanup(func() { _ = b.Resign(context.Background()) })
	assert.Equal(t, int64(2), b.Term())
	var acquired time.Time
	require.NoError(t, stores[1].Pool().QueryRow(t.Context(),
		`SELECT acquired_at FROM `+stores[1].Schema()+`.leases WHERE name = 'coordinator'`).Scan(&acquired))
	assert.Equal(t, leaseStart.Add(testTTL), acquired.UTC(), "taken over exactly when a's lease ran out")

	_, err := a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x"})
	requireFenced(t, err, 1, 2)
}

func TestResignLetsAnotherLeadAtOnce(t *testing.T) {
	stores := coordinators(t, 2)
	c := foreman.NewFakeClock(leaseStart)
	a := lead(t, stores[0], "a", c)
	require.NoError(t, a.Resign(t.Context()))
	require.NoError(t, a.Resign(t.Context()), "a second Resign is fine")
	require.ErrorIs(t, a.Err(), pgstore.ErrLeadershipLost)
	_, err := a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x"})
	require.ErrorIs(t, err, pgstore.ErrFenced, "a resigned leader's view refuses at once")

	b := lead(t, stores[1], "b", c) // same instant: no waiting for expiry
	assert.Equal(t, int64(2), b.Term())
	_, err = b.Store().Apply(t.Context(), store.Op{Kind: "item", ID: "x"})
	require.NoError(t, err)
}

// Contenders racing for a free lease: exactly one wins, and every other
// one is told who did.
func TestOneLeaderAmongRacingContenders(t *testing.T) {
	const contenders = 8
	stores := coordinators(t, 2)
	start := make(chan struct{})
	results := make([]error, contenders)
	leaders := make([]*pgstore.Leader, contenders)
	var wg sync.WaitGroup
	for i := range contenders {
		wg.Go(func() {
			<-start
			// The database's clock decides expiry here (no Clock).
			leaders[i], results[i] = stores[i%2].TryLead(t.Context(), pgstore.LeaseOptions{Holder: fmt.Sprint("c", i), TTL: time.Hour})
		})
	}
	close(start)
	wg.Wait()
	var winner string
	for i, err := range results {
		if err == nil {
			require.Empty(t, winner, "two winners")
			winner = leaders[i].Holder()
			assert.Equal(t, int64(1), leaders[i].Term())
			t.Cleanup(func() { _ = leaders[i].Resign(context.Background()) })
		}
	}
	require.NotEmpty(t, winner)
	for _, err := range results {
		if err != nil {
			var held *pgstore.LeaseHeldError
			require.ErrorAs(t, err, &held)
			assert.Equal(t, winner, held.Holder)
			assert.Equal(t, int64(1), held.Term)
			assert.InDelta(t, time.Hour.Seconds(), held.Remaining.Seconds(), 60, "the database's clock: about an hour left")
		}
	}
}

// Fenced writes in flight when another coordinator takes the lease over
// either commit before the takeover or fail: none lands after it. The
// takeover's UPDATE of the lease row waits for the writes holding it FOR
// SHARE, and every write after it reads the new term.
func TestNoFencedWriteLandsAfterATakeover(t *testing.T) {
	const writers = 4
	stores := coordinators(t, 2)
	clockA, clockB := foreman.NewFakeClock(leaseStart), foreman.NewFakeClock(leaseStart)
	a := lead(t, stores[0], "a", clockA)

	written := make(chan struct{}, 1000)
	errs := make([]error, writers)
	var wg sync.WaitGroup
	for w := range writers {
		wg.Go(func() {
			for i := 0; ; i++ {
				_, err := a.Store().Apply(t.Context(), store.Op{Kind: "item", ID: fmt.Sprintf("w%d-%04d", w, i)})
				if err != nil {
					errs[w] = err
					return
				}
				select {
				case written <- struct{}{}:
				default:
				}
			}
		})
	}
	for range 20 { // let the writers get going
		<-written
	}
	clockB.Advance(testTTL)
	b := lead(t, stores[1], "b", clockB)
	atTakeover, err := b.Store().List(t.Context(), "item")
	require.NoError(t, err)
	wg.Wait()
	for _, err := range errs {
		requireFenced(t, err, 1, 2)
	}
	after, err := b.Store().List(t.Context(), "item")
	require.NoError(t, err)
	assert.Equal(t, len(atTakeover), len(after), "no write of the old leader landed after the takeover")
	assert.GreaterOrEqual(t, len(after), 20)
}

// A leader that cannot reach the database stops leading when its lease
// runs out by its own clock, without anyone telling it.
func TestLeaderThatCannotRenewStopsWhenTheLeaseRunsOut(t *testing.T) {
	stores := coordinators(t, 2)
	c := foreman.NewFakeClock(leaseStart)
	a, err := stores[0].TryLead(t.Context(), pgstore.LeaseOptions{Holder: "a", TTL: testTTL, Clock: c})
	require.NoError(t, err)
	defer func() { _ = a.Resign(context.Background()) }()
	require.NoError(t, stores[0].Close()) // every renewal fails from now on

	for a.Err() == nil {
		require.NoError(t, c.BlockUntil(t.Context(), 2)) // renewal and expiry timers armed
		next, ok := c.NextDeadline()
		require.True(t, ok)
		require.False(t, next.After(leaseStart.Add(testTTL)), "no timer beyond the lease while it is unrenewed")
		c.Set(next)
		if !next.Before(leaseStart.Add(testTTL)) {
			waitLost(t, a)
		}
	}
	require.ErrorIs(t, a.Err(), pgstore.ErrLeadershipLost)
	assert.NotErrorIs(t, a.Err(), pgstore.ErrFenced, "nobody took it over: it ran out")
	assert.Contains(t, a.Err().Error(), "ran out")

	b := lead(t, stores[1], "b", c)
	assert.Equal(t, int64(2), b.Term())
}

// With no Clock, the database's clock stamps the lease: expiry is TTL after
// the database's now, whatever this host's clock says.
func TestDatabaseClockStampsTheLease(t *testing.T) {
	stores := coordinators(t, 1)
	a := lead(t, stores[0], "a", nil)
	var acquired, expires, dbNow time.Time
	require.NoError(t, stores[0].Pool().QueryRow(t.Context(),
		`SELECT acquired_at, expires_at, clock_timestamp() FROM `+stores[0].Schema()+`.leases WHERE name = 'coordinator'`).Scan(&acquired, &expires, &dbNow))
	assert.Equal(t, testTTL, expires.Sub(acquired))
	assert.False(t, acquired.After(dbNow))
	assert.Nil(t, a.Err())
}

func TestLeaseOptionsAndFenceArguments(t *testing.T) {
	s := openStore(t, pgstore.Options{})
	for _, o := range []pgstore.LeaseOptions{
		{TTL: time.Second, RenewEvery: time.Second},
		{TTL: -time.Second},
		{Name: "bad\x00name"},
		{Holder: "\xff"},
	} {
		_, err := s.TryLead(t.Context(), o)
		assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, "%+v", o)
		_, err = s.Campaign(t.Context(), o)
		assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, "%+v", o)
	}
	_, err := s.Fenced("", 1)
	assert.ErrorIs(t, err, pgstore.ErrInvalidOptions)
	_, err = s.Fenced("coordinator", 0)
	assert.ErrorIs(t, err, pgstore.ErrInvalidOptions)

	// A fence on a lease nobody ever took: current term 0.
	f, err := s.Fenced("coordinator", 3)
	require.NoError(t, err)
	_, err = f.Apply(t.Context(), store.Op{Kind: "item", ID: "x"})
	requireFenced(t, err, 3, 0)

	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err = s.Campaign(ctx, pgstore.LeaseOptions{})
	assert.True(t, errors.Is(err, context.Canceled), "%v", err)
}

// A status command reads who leads without contending.
func TestReadLeaseSaysWhoLeads(t *testing.T) {
	s := coordinators(t, 1)[0]
	_, found, err := s.ReadLease(t.Context(), "")
	require.NoError(t, err)
	assert.False(t, found, "no one ever led")

	l, err := s.TryLead(t.Context(), pgstore.LeaseOptions{Holder: "a", TTL: time.Hour})
	require.NoError(t, err)
	st, found, err := s.ReadLease(t.Context(), "")
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, "coordinator", st.Lease)
	assert.Equal(t, "a", st.Holder)
	assert.Equal(t, int64(1), st.Term)
	assert.True(t, st.Live())

	require.NoError(t, l.Resign(t.Context()))
	st, _, err = s.ReadLease(t.Context(), "coordinator")
	require.NoError(t, err)
	assert.False(t, st.Live(), "given up: nobody leads")
	assert.Equal(t, "a", st.Holder)

	require.NoError(t, s.Close())
	_, _, err = s.ReadLease(t.Context(), "")
	assert.ErrorIs(t, err, store.ErrClosed)
}
