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
// clause of its INSERT, UPDATE or DELETE (prepared once on the writing
// connection), so the happy path costs one statement per op and one WAL
// fsync per Apply, plus SQLite's periodic checkpoint. Durable throughput is
// therefore bounded by the disk's fsync rate when every transition commits
// alone; batching transitions into one Apply is what makes the store fast
// (BenchmarkApply compares both, on SQLite, on the raw driver and on
// Memory, with an append+fsync floor, in one run).
//
// # Schema and bad files
//
// A table foreman_schema holds the schema version. Open creates the schema
// in a new or empty file and migrates an older one forward in one
// transaction. It refuses, without writing anything, a database with a
// newer schema (*SchemaVersionError: upgrade Foreman), a SQLite database
// with other tables and no schema table (ErrForeignDatabase), and a file
// that is not a database or fails PRAGMA quick_check (*CorruptError). A
// corrupt file is never replaced or repaired: move it aside before
// starting over.
package sqlitestore
