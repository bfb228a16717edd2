package pgtransport

import (
	"errors"
	"fmt"
)

// Errors of this package (matched with errors.Is). A coordinator whose
// lease term is no longer current fails with pgstore.ErrFenced (a
// *pgstore.FencedError).
var (
	// ErrInvalidConfig: a Config or HostConfig the transport cannot work
	// with; the message names the field.
	ErrInvalidConfig = errors.New("pgtransport: invalid configuration")
	// ErrClosed: the coordinator or host was closed.
	ErrClosed = errors.New("pgtransport: closed")
	// ErrNotMigrated: the transport's tables are older than this build's
	// and the role (a worker host's, see GrantWorker) may not migrate
	// them; a coordinator of this build does.
	ErrNotMigrated = errors.New("pgtransport: the transport's tables need migrating")
	// ErrSchemaVersion matches a *SchemaVersionError.
	ErrSchemaVersion = errors.New("pgtransport: unsupported schema version")
)

// SchemaVersionError reports transport tables written by a newer Foreman.
type SchemaVersionError struct {
	Schema    string
	Found     int
	Supported int
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("pgtransport: schema %q has transport version %d, newer than %d which this build supports: upgrade Foreman", e.Schema, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrSchemaVersion) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaVersion }
