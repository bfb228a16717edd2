package pgstore

import (
	"context"

	"github.com/jackc/pgx/v5/pgxpool"
)

// MigrateTo brings a schema to an older version, so that tests can check
// the migrations from it.
func MigrateTo(ctx context.Context, pool *pgxpool.Pool, schema string, version int) error {
	return migrate(ctx, pool, schema, version)
}

// SetBeforeWrite installs a hook that runs before each group commit.
func (s *Store) SetBeforeWrite(f func(applies int)) { s.beforeWrite = f }

// Queued is how many Applies wait for a group commit.
func (s *Store) Queued() int { return s.group.Queued() }

// Pool exposes the store's pool, to change the database behind its back.
func (s *Store) Pool() *pgxpool.Pool { return s.pool }

// Abandon stops a leader's renewals without releasing or losing the lease:
// what a crashed process leaves behind.
func (l *Leader) Abandon() {
	l.stopOnce.Do(func() { close(l.stop) })
	<-l.exited
}

// Writing is how many writer slots are taken: 0 once every Apply returned.
func (s *Store) Writing() int { return s.group.Leading() }
