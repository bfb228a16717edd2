package pgstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/store"
)

// LeaseOptions configures TryLead and Campaign. The zero value means the
// documented defaults.
type LeaseOptions struct {
	// Name is the lease contended for. Default: "coordinator".
	Name string
	// Holder identifies this contender in the lease row and in errors.
	// Default: host name, process id and a random suffix, unique per call.
	Holder string
	// TTL is how long the lease lasts after each renewal: a leader that
	// stops renewing (crashed, paused, cut off) is replaced once TTL has
	// passed since its last renewal. Default: 10 s.
	TTL time.Duration
	// RenewEvery is how often the leader renews; it must be below TTL.
	// Default: TTL/3, so that two renewals can fail before the lease runs
	// out.
	RenewEvery time.Duration
	// RetryEvery caps how long Campaign waits between attempts; it also
	// waits no longer than the current lease has left. Default: TTL/2.
	RetryEvery time.Duration
	// Clock, when set, computes expiry from this clock too (its readings
	// are written to the lease row), so every contender must read the same
	// timeline: tests give each contender a fake clock and move them
	// together, or hold one still to play a paused process. Default: none
	// (nil, the right choice in production: expiry follows the database's
	// clock, the one clock every host shares, and renewals and retries are
	// timed with this host's wall clock).
	Clock foreman.Clock
	// Logger receives renewal failures and the loss of leadership.
	// Default: none (nil discards them).
	Logger *slog.Logger
}

const (
	defaultLeaseName = "coordinator"
	defaultLeaseTTL  = 10 * time.Second
)

// The lease row: a holder, a term that grows by one with every
// acquisition, and an expiry. $3 (or $2) is the contender's clock reading,
// or NULL for the database's own. Taking the lease over is one statement
// that inserts the row or takes over an expired one, in a transaction that
// first takes the lease's advisory lock exclusively: it waits for the
// fenced writes in flight (apply_batch holds the lock shared), and no
// fenced write can read the old term after it commits.
const (
	takeLeaseLockSQL = `SELECT pg_advisory_xact_lock(@leaselock($1::text))`
	tryLeadSQL       = `WITH now AS (SELECT coalesce($3::timestamptz, clock_timestamp()) AS t)
		INSERT INTO @.leases AS l (name, holder, term, expires_at, acquired_at)
		SELECT $1, $2, 1, now.t + $4::bigint * interval '1 microsecond', now.t FROM now
		ON CONFLICT (name) DO UPDATE
		SET holder = excluded.holder, term = l.term + 1, expires_at = excluded.expires_at, acquired_at = excluded.acquired_at
		WHERE l.expires_at <= excluded.acquired_at
		RETURNING l.term`
	readLeaseSQL = `SELECT holder, term, expires_at,
		(extract(epoch FROM expires_at - coalesce($2::timestamptz, clock_timestamp())) * 1000000)::bigint
		FROM @.leases WHERE name = $1`
	// Renewing does not check the expiry: a lease nobody took over is still
	// this term's, and no one else can have written under it.
	renewLeaseSQL = `UPDATE @.leases SET expires_at = coalesce($4::timestamptz, clock_timestamp()) + $5::bigint * interval '1 microsecond'
		WHERE name = $1 AND holder = $2 AND term = $3`
	// Released: expired since it was taken, by any clock reading later.
	dropLeaseSQL = `UPDATE @.leases SET expires_at = acquired_at WHERE name = $1 AND holder = $2 AND term = $3`
)

func (o LeaseOptions) resolve() (LeaseOptions, error) {
	o.Name = or(o.Name, defaultLeaseName)
	if !storable(o.Name) || !storable(o.Holder) {
		return o, fmt.Errorf("%w: lease name %q and holder %q must be UTF-8 without NUL", ErrInvalidOptions, o.Name, o.Holder)
	}
	if o.TTL < 0 || o.RenewEvery < 0 || o.RetryEvery < 0 {
		return o, fmt.Errorf("%w: negative TTL, RenewEvery or RetryEvery", ErrInvalidOptions)
	}
	o.TTL = orDuration(o.TTL, defaultLeaseTTL)
	o.RenewEvery = orDuration(o.RenewEvery, o.TTL/3)
	o.RetryEvery = orDuration(o.RetryEvery, o.TTL/2)
	if o.RenewEvery >= o.TTL {
		return o, fmt.Errorf("%w: RenewEvery %v must be shorter than TTL %v", ErrInvalidOptions, o.RenewEvery, o.TTL)
	}
	if o.Holder == "" {
		host, _ := os.Hostname()
		var b [4]byte
		_, _ = rand.Read(b[:])
		o.Holder = fmt.Sprintf("%s/%d/%s", host, os.Getpid(), hex.EncodeToString(b[:]))
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	return o, nil
}

// TryLead takes the lease if it is free or expired and returns the Leader,
// which renews it in the background until it resigns or loses it. When
// another holder has an unexpired lease it returns a *LeaseHeldError
// (errors.Is ErrLeaseHeld) saying who and for how long.
func (s *Store) TryLead(ctx context.Context, opts LeaseOptions) (*Leader, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	return s.tryLead(ctx, o)
}

// Campaign waits until this contender holds the lease and returns the
// Leader; it tries again whenever the current lease may have run out, and
// at least every RetryEvery. Errors other than a held lease (the database
// unreachable, say) are logged and retried; Campaign returns early only
// when ctx ends, the store is closed, or the options are invalid.
func (s *Store) Campaign(ctx context.Context, opts LeaseOptions) (*Leader, error) {
	o, err := opts.resolve()
	if err != nil {
		return nil, err
	}
	c := clock.OrReal(o.Clock)
	for {
		l, err := s.tryLead(ctx, o)
		if err == nil {
			return l, nil
		}
		if ctx.Err() != nil || errors.Is(err, store.ErrClosed) {
			return nil, err
		}
		wait := o.RetryEvery
		var held *LeaseHeldError
		if errors.As(err, &held) {
			wait = max(min(wait, held.Remaining), 0)
		} else {
			o.Logger.Warn("pgstore: campaign: will retry", "lease", o.Name, "holder", o.Holder, "err", err)
		}
		if err := clock.Sleep(ctx, c, wait); err != nil {
			return nil, err
		}
	}
}

func (s *Store) tryLead(ctx context.Context, o LeaseOptions) (*Leader, error) {
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	// A cheap look first, so that contenders waiting for a live lease never
	// take the lock that holds up the leader's writes.
	if err := s.heldBy(ctx, o); err != nil {
		var held *LeaseHeldError
		if !errors.As(err, &held) || held.Remaining > 0 {
			return nil, err
		}
	}
	c := clock.OrReal(o.Clock)
	start := c.Now()
	term, err := s.takeLease(ctx, o)
	if errors.Is(err, pgx.ErrNoRows) { // another contender was quicker
		if err := s.heldBy(ctx, o); err != nil {
			return nil, err
		}
		return nil, &LeaseHeldError{Lease: o.Name} // and gone again: try again
	}
	if err != nil {
		return nil, s.fail("take lease "+o.Name, err)
	}
	l := &Leader{
		s: s, opts: o, clock: c, term: term,
		lostCh: make(chan struct{}), stop: make(chan struct{}), exited: make(chan struct{}),
	}
	l.view = &FencedStore{s: s, fence: fence{lease: o.Name, term: term}, lost: l.Err}
	o.Logger.Info("pgstore: leading", "lease", o.Name, "holder", o.Holder, "term", term)
	go l.renewLoop(start.Add(o.TTL))
	return l, nil
}

// takeLease inserts or takes over the lease row under the lease's lock;
// pgx.ErrNoRows means it was live.
func (s *Store) takeLease(ctx context.Context, o LeaseOptions) (int64, error) {
	tx, err := s.pool.Begin(ctx)
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, s.sql.takeLock, o.Name); err != nil {
		return 0, err
	}
	var term int64
	if err := tx.QueryRow(ctx, s.sql.tryLead, o.Name, o.Holder, leaseNow(o.Clock), o.TTL.Microseconds()).Scan(&term); err != nil {
		return 0, err
	}
	return term, tx.Commit(ctx)
}

// heldBy reads who holds the lease. It returns a *LeaseHeldError, whose
// Remaining is zero or less when the lease has run out, or nil when there
// is no lease row at all.
func (s *Store) heldBy(ctx context.Context, o LeaseOptions) error {
	held := &LeaseHeldError{Lease: o.Name}
	var micros int64
	err := s.pool.QueryRow(ctx, s.sql.readLease, o.Name, leaseNow(o.Clock)).Scan(&held.Holder, &held.Term, &held.ExpiresAt, &micros)
	if errors.Is(err, pgx.ErrNoRows) {
		return nil
	}
	if err != nil {
		return s.fail("read lease "+o.Name, err)
	}
	held.ExpiresAt = held.ExpiresAt.UTC()
	held.Remaining = time.Duration(micros) * time.Microsecond
	return held
}

// leaseNow is the contender's clock reading for the lease row, or nil to
// let the database use its own.
func leaseNow(c foreman.Clock) *time.Time {
	if c == nil {
		return nil
	}
	t := c.Now().UTC().Truncate(time.Microsecond)
	return &t
}

// LeaseState is a lease as the database has it: who took it last, at what
// term, and how long it has left (zero or less: it ran out, or was given
// up, and the next contender takes it).
type LeaseState struct {
	Lease     string
	Holder    string
	Term      int64
	ExpiresAt time.Time
	Remaining time.Duration
}

// Live reports whether the lease had time left when it was read: a
// coordinator leads.
func (l LeaseState) Live() bool { return l.Remaining > 0 }

// ReadLease reads the lease name (default "coordinator") without
// contending for it, for a status page or command; found is false when no
// one ever took it.
func (s *Store) ReadLease(ctx context.Context, name string) (state LeaseState, found bool, err error) {
	leave, err := s.enter()
	if err != nil {
		return LeaseState{}, false, err
	}
	defer leave()
	name = or(name, defaultLeaseName)
	err = s.heldBy(ctx, LeaseOptions{Name: name})
	var held *LeaseHeldError
	switch {
	case err == nil:
		return LeaseState{Lease: name}, false, nil
	case errors.As(err, &held):
		return LeaseState{Lease: name, Holder: held.Holder, Term: held.Term, ExpiresAt: held.ExpiresAt, Remaining: held.Remaining}, true, nil
	}
	return LeaseState{}, false, err
}
