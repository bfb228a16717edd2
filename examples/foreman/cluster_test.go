package main

import (
	"bytes"
	"context"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"
)

// Helpers of the process tests (roles_test.go, multichaos_test.go): the
// coordinators' leases, and waiting for a process's output or exit.

// leaseArgs are the lease flags of every coordinator in these tests, extra
// appended. The lease is long, so that a healthy leader on a loaded machine
// never loses it: it renews every 500 ms, and its renewals may fail or come
// late for most of a minute before the lease runs out (with the 2 s lease
// these tests had, a leader starved for 2 s stepped down and the plan could
// be left with no coordinator). A test that strikes the leader
// does not wait for its lease to run out: it ends the lease in the database
// (failOver), as its running out would, and a contender, which looks every
// 200 ms, takes over at once. Failover by the TTL itself is tested in
// pipeline/pgstore on a fake clock.
func leaseArgs(extra ...string) []string {
	return append([]string{"-lease-ttl", "1m", "-lease-renew", "500ms", "-lease-retry", "200ms"}, extra...)
}

// failOver plays the lease of term running out, for a leader the test
// stopped (SIGSTOP) or killed: it ends that lease in the database until
// led reports that another coordinator leads, within limit. A renewal the
// struck leader had sent before it stopped may still reach the database
// after the lease was ended and extend it; then it is ended again.
func (c *cluster) failOver(t *testing.T, term int, led func() bool, limit time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), limit)
	defer cancel()
	conn, err := pgx.Connect(ctx, c.db)
	require.NoError(t, err)
	defer conn.Close(context.Background())
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !led() {
		// The store's default schema and lease (pgstore: foreman.leases, "coordinator").
		_, err := conn.Exec(ctx, `UPDATE foreman.leases SET expires_at = clock_timestamp()
			WHERE name = 'coordinator' AND term = $1 AND expires_at > clock_timestamp()`, term)
		if ctx.Err() == nil {
			require.NoError(t, err, "ending the lease of term %d", term)
		}
		select {
		case <-tick.C:
		case <-ctx.Done():
			t.Fatalf("the lease of term %d ended and no coordinator took over within %v:\n%s", term, limit, c.outputs())
		}
	}
}

// awaitTakeover waits, within limit, until led reports that another
// coordinator leads after the lease of term ran out by itself.
func (c *cluster) awaitTakeover(t *testing.T, term int, led func() bool, limit time.Duration) {
	t.Helper()
	deadline := time.NewTimer(limit)
	defer deadline.Stop()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for !led() {
		select {
		case <-tick.C: // the leaders' terms are read again: a condition, not a timing assertion
		case <-deadline.C:
			t.Fatalf("the lease of term %d ran out and no coordinator took over within %v:\n%s", term, limit, c.outputs())
		}
	}
}

// nextExit returns a channel closed when one of the cluster's processes
// exits next.
func (c *cluster) nextExit() <-chan struct{} {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.exitWake == nil {
		c.exitWake = make(chan struct{})
	}
	return c.exitWake
}

// syncBuffer is a process's output, written by its pipe's goroutine and read
// by the test; changed tells a reader waiting for some output that more came.
type syncBuffer struct {
	mu   sync.Mutex
	b    bytes.Buffer
	wake chan struct{} // closed and replaced on every write
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake != nil {
		close(s.wake)
		s.wake = nil
	}
	return s.b.Write(p)
}

// changed returns a channel closed at the next write.
func (s *syncBuffer) changed() <-chan struct{} {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.wake == nil {
		s.wake = make(chan struct{})
	}
	return s.wake
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
