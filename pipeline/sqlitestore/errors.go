package sqlitestore

import (
	"errors"
	"fmt"

	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"
)

// Errors of this package, beyond those of store (matched with errors.Is).
var (
	// ErrCorrupt matches a *CorruptError.
	ErrCorrupt = errors.New("sqlitestore: database is corrupt")
	// ErrSchemaVersion matches a *SchemaVersionError.
	ErrSchemaVersion = errors.New("sqlitestore: unsupported schema version")
	// ErrForeignDatabase: the file is a SQLite database with tables but
	// without Foreman's schema table; Open leaves it alone.
	ErrForeignDatabase = errors.New("sqlitestore: not a Foreman database")
	// ErrReadOnly: Apply on a store opened with Options.ReadOnly.
	ErrReadOnly = errors.New("sqlitestore: store is read-only")
)

// CorruptError reports a file that SQLite cannot read as a database, or
// whose integrity check fails. The file is left exactly as it was: move it
// aside (keep it for inspection) before creating a new store at its path.
type CorruptError struct {
	Path string
	Err  error
}

func (e *CorruptError) Error() string {
	return fmt.Sprintf("sqlitestore: %s is corrupt (file kept as is): %v", e.Path, e.Err)
}

// Is makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Is(target error) bool { return target == ErrCorrupt }

// Unwrap returns SQLite's error.
func (e *CorruptError) Unwrap() error { return e.Err }

// SchemaVersionError reports a database whose schema this build cannot use:
// one written by a newer Foreman (Found > Supported), or, for a read-only
// open, one that still needs a migration a writer would carry out
// (Found < Supported). The database is never rewritten to fit.
type SchemaVersionError struct {
	Path      string
	Found     int
	Supported int
}

func (e *SchemaVersionError) Error() string {
	if e.Found > e.Supported {
		return fmt.Sprintf("sqlitestore: %s has schema version %d, newer than %d which this build supports: upgrade Foreman", e.Path, e.Found, e.Supported)
	}
	return fmt.Sprintf("sqlitestore: %s has schema version %d and needs migrating to %d: open it once for writing", e.Path, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrSchemaVersion) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaVersion }

// classify turns SQLite's corruption codes into a *CorruptError and leaves
// every other error as it is.
// isBusy reports whether err is SQLite's "database is locked".
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

func classify(path string, err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case sqlite3.SQLITE_CORRUPT, sqlite3.SQLITE_NOTADB:
			return &CorruptError{Path: path, Err: err}
		}
	}
	return err
}
