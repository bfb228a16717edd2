package pgstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// Leader is one contender's hold on a lease, from TryLead or Campaign. It
// renews the lease in the background until Resign, or until it learns it
// has lost it: another holder took it over (its renewal finds a later
// term), or its own clock says the lease ran out before a renewal got
// through. Then Lost closes, Err says why, and Store refuses every write.
//
// Losing is detected late by nature (a paused process learns nothing until
// it runs again), so safety does not rest on it: every write through Store
// is checked against the lease's current term inside the transaction that
// writes, and fails with ErrFenced once a later term exists.
type Leader struct {
	s     *Store
	opts  LeaseOptions
	clock clock.Clock
	term  int64
	view  *FencedStore

	mu     sync.Mutex
	err    error
	lostCh chan struct{}

	stopOnce sync.Once
	stop     chan struct{}
	exited   chan struct{}
}

// Term is this leadership's term number: greater than every earlier
// holder's.
func (l *Leader) Term() int64 { return l.term }

// Holder is the identity written in the lease row.
func (l *Leader) Holder() string { return l.opts.Holder }

// Lease is the name of the lease held.
func (l *Leader) Lease() string { return l.opts.Name }

// Store is the fenced view to make every write through: its Apply fails
// with ErrFenced as soon as the term is no longer current, or once this
// Leader knows it has lost the lease. Closing it does not close the Store.
func (l *Leader) Store() *FencedStore { return l.view }

// Lost is closed once this Leader has stopped leading, for whatever reason
// (Err says which).
func (l *Leader) Lost() <-chan struct{} { return l.lostCh }

// Err is nil while leading; afterwards it matches ErrLeadershipLost and
// wraps the cause: a *FencedError when another holder took the lease over,
// or the expiry or resignation.
func (l *Leader) Err() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.err
}

func (l *Leader) lose(cause error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err != nil {
		return
	}
	l.err = fmt.Errorf("%w: %w", ErrLeadershipLost, cause)
	close(l.lostCh)
	l.opts.Logger.Warn("pgstore: no longer leading", "lease", l.opts.Name, "holder", l.opts.Holder, "term", l.term, "err", cause)
}

// Resign stops renewing and, unless the lease was already lost, releases
// it at once so that another contender need not wait for it to expire.
// Writes through Store fail from the moment Resign is called. Safe to call
// twice; it always stops the renewal goroutine, even when releasing fails.
func (l *Leader) Resign(ctx context.Context) error {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.exited
	if err := l.Err(); err != nil {
		return nil // lost, or resigned before: nothing of ours to release
	}
	l.lose(errors.New("resigned"))
	leave, err := l.s.enter()
	if err != nil {
		return err
	}
	defer leave()
	if _, err := l.s.pool.Exec(ctx, l.s.sql.dropLease, l.opts.Name, l.opts.Holder, l.term); err != nil {
		return l.s.fail("release lease "+l.opts.Name, err)
	}
	return nil
}

// renewLoop renews every RenewEvery and gives up when validUntil passes
// without a successful renewal. validUntil is measured from the moment a
// renewal was sent, so this side never believes in a lease the database
// considers expired (given clocks that run at the same rate).
func (l *Leader) renewLoop(validUntil time.Time) {
	defer close(l.exited)
	renew := l.clock.NewTimer(l.opts.RenewEvery)
	defer renew.Stop()
	expiry := l.clock.NewTimer(validUntil.Sub(l.clock.Now()))
	defer expiry.Stop()
	for {
		select {
		case <-l.stop:
			return
		case <-expiry.C():
			l.lose(fmt.Errorf("lease %q term %d ran out before it could be renewed", l.opts.Name, l.term))
			return
		case <-renew.C():
		}
		start := l.clock.Now()
		if !start.Before(validUntil) {
			l.lose(fmt.Errorf("lease %q term %d ran out before it could be renewed", l.opts.Name, l.term))
			return
		}
		ok, err := l.renew(validUntil.Sub(start))
		switch {
		case err != nil:
			l.opts.Logger.Warn("pgstore: lease renewal failed, will retry", "lease", l.opts.Name, "term", l.term, "err", err)
		case !ok:
			l.lose(l.takenOver())
			return
		default:
			validUntil = start.Add(l.opts.TTL)
			expiry.Reset(validUntil.Sub(l.clock.Now()))
		}
		renew.Reset(l.opts.RenewEvery)
	}
}

// renew extends the lease; ok is false when the row is no longer this
// term's. The call gets no longer than the lease has left.
func (l *Leader) renew(left time.Duration) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(context.Background(), left)
	defer cancel()
	leave, err := l.s.enter()
	if err != nil {
		return false, err
	}
	defer leave()
	tag, err := l.s.pool.Exec(ctx, l.s.sql.renewLease, l.opts.Name, l.opts.Holder, l.term, leaseNow(l.opts.Clock), l.opts.TTL.Microseconds())
	if err != nil {
		return false, err
	}
	return tag.RowsAffected() == 1, nil
}

// takenOver describes the loss once a renewal found the row changed.
func (l *Leader) takenOver() error {
	ctx, cancel := context.WithTimeout(context.Background(), l.opts.RenewEvery)
	defer cancel()
	fe := &FencedError{Lease: l.opts.Name, Term: l.term}
	if err := l.s.heldBy(ctx, l.opts); err != nil {
		var held *LeaseHeldError
		if errors.As(err, &held) {
			fe.Current = held.Term
		}
	}
	return fe
}
