package sqlitestore

import "database/sql"

// DSN is the connection string Open uses, for the raw-driver baseline of
// the benchmarks.
var DSN = dsn

// DBs exposes the writing connection (nil when read-only) and the reading
// pool, so tests can ask SQLite what a connection really runs with.
func (s *Store) DBs() (writer, reader *sql.DB) { return s.writer, s.reader }

// Queued is how many Apply calls wait for the next commit.
func (s *Store) Queued() int { return s.group.Queued() }

// Leading says whether a caller is committing (or about to).
func (s *Store) Leading() bool { return s.group.Leading() > 0 }
