package sqlitestore

import "database/sql"

// DSN is the connection string Open uses, for the raw-driver baseline of
// the benchmarks.
var DSN = dsn

// DBs exposes the writing connection (nil when read-only) and the reading
// pool, so tests can ask SQLite what a connection really runs with.
func (s *Store) DBs() (writer, reader *sql.DB) { return s.writer, s.reader }
