package sqlitestore

// DSN is the connection string Open uses, for the raw-driver baseline of
// the benchmarks.
var DSN = dsn
