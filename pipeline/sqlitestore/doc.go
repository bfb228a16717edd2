// Package sqlitestore is the durable default store.Store: one SQLite file,
// through modernc.org/sqlite (pure Go, no cgo). It lives in its own package
// so that hosts that bring their own store do not compile SQLite.
//
// # Durability and concurrency
//
// The database runs in WAL mode with synchronous=FULL: when Apply returns,
// its transaction is in the write-ahead log and fsynced, and survives a
// crash or a power cut. Writes go through one connection in immediate
// transactions (BEGIN IMMEDIATE takes the write lock at once, so two
// writers queue instead of failing halfway); a busy timeout (default 5 s)
// covers writers in other processes. Reads use a separate pool of read-only
// connections and never wait for the writer: each Get or List is one
// statement and reads one committed snapshot, so an Apply is seen whole or
// not at all. Another process can therefore read status while a
// coordinator writes: Open the same file with Options.ReadOnly.
//
// Every record carries a version; an op's version check is the WHERE
// clause of its UPDATE or DELETE, or the ON CONFLICT of its INSERT
// (prepared once on the writing connection), so an update costs one
// statement and one WAL fsync per Apply, plus SQLite's periodic checkpoint.
// A delete moves the record's last version to a separate tombstones table
// (a second statement), and a create reads it from there to continue the
// versions (a second statement only when a tombstone was there); records
// holds live records only, so nothing that reads or counts it sees a
// deleted one. PurgeTombstones (store.TombstonePurger) forgets old ones.
// A commit costs one fsync, so durable throughput would be bounded by the
// disk's fsync rate if every Apply committed alone. Concurrent Apply calls
// therefore share commits (group commit): the caller that finds no commit
// in flight takes everything queued into one transaction, and calls that
// arrive meanwhile join the next one. There is no timer, so a lone writer
// commits at once. Each call still gets its own outcome: its ops run under
// a savepoint, and a version conflict rolls back that caller's ops only;
// a failing statement fails its own caller and the others are retried in a
// new transaction; only a failed commit fails the whole batch, none of
// which was written. WriteStats counts commits and acknowledged calls.
// Batching transitions into one Apply helps in the same way
// (BenchmarkApply compares both, on SQLite, on the raw driver and on
// Memory, with an append+fsync floor, in one run).
//
// # Schema and bad files
//
// A table foreman_schema holds the schema version. Open creates the schema
// in a new or empty file and migrates an older one forward in one
// transaction (schema 1 to 2 adds the tombstones table and keeps every
// record and version; records deleted under schema 1 left no tombstone and
// start over at 1 if created again). A read-only Open of a file that needs
// migrating fails with *SchemaVersionError until a writer opens it. Open
// refuses, without writing anything, a database with a newer schema
// (*SchemaVersionError: upgrade Foreman), a SQLite database with other
// tables and no schema table (ErrForeignDatabase), and a file that is not
// a database or fails PRAGMA quick_check (*CorruptError). A corrupt file
// is never replaced or repaired: move it aside before starting over.
package sqlitestore
