package pgstore

import (
	"errors"
	"fmt"
	"time"
)

// Errors of this package, beyond those of store (matched with errors.Is).
var (
	// ErrSchemaVersion matches a *SchemaVersionError.
	ErrSchemaVersion = errors.New("pgstore: unsupported schema version")
	// ErrForeignSchema: the PostgreSQL schema has tables but not Foreman's
	// schema table; Open leaves it alone.
	ErrForeignSchema = errors.New("pgstore: not a Foreman schema")
	// ErrFenced matches a *FencedError: a write made under a lease term
	// that is no longer current. Nothing of that Apply was written.
	ErrFenced = errors.New("pgstore: fenced: the lease term is no longer current")
	// ErrLeaseHeld matches a *LeaseHeldError: another holder has the lease.
	ErrLeaseHeld = errors.New("pgstore: lease held by another holder")
	// ErrLeadershipLost is what Leader.Err returns once the leader has
	// stopped leading (it wraps the cause).
	ErrLeadershipLost = errors.New("pgstore: leadership lost")
	// ErrInvalidOptions: Open, TryLead or Campaign got options they cannot
	// work with; the message names the field.
	ErrInvalidOptions = errors.New("pgstore: invalid options")
	// ErrInvalidSchemaName matches a *SchemaNameError.
	ErrInvalidSchemaName = errors.New("pgstore: invalid schema name")
)

// SchemaNameError refuses a schema name that is not a plain identifier
// (ValidateSchema). It matches ErrInvalidSchemaName and, from Open,
// ErrInvalidOptions.
type SchemaNameError struct {
	Schema string
	Reason string
}

func (e *SchemaNameError) Error() string {
	return fmt.Sprintf("pgstore: schema name %q: %s; a schema name is a lowercase letter or _ and then at most 62 lowercase letters, digits or _ ([a-z_][a-z0-9_]{0,62}), not starting with pg_", e.Schema, e.Reason)
}

// Is matches ErrInvalidSchemaName and ErrInvalidOptions.
func (e *SchemaNameError) Is(target error) bool {
	return target == ErrInvalidSchemaName || target == ErrInvalidOptions
}

// SchemaVersionError reports a schema written by a newer Foreman
// (Found > Supported). It is never rewritten to fit.
type SchemaVersionError struct {
	Schema    string
	Found     int
	Supported int
}

func (e *SchemaVersionError) Error() string {
	return fmt.Sprintf("pgstore: schema %q has version %d, newer than %d which this build supports: upgrade Foreman", e.Schema, e.Found, e.Supported)
}

// Is makes errors.Is(err, ErrSchemaVersion) true.
func (e *SchemaVersionError) Is(target error) bool { return target == ErrSchemaVersion }

// FencedError says that a write was refused because its lease term is no
// longer the lease's current one: another holder has taken the lease over
// since (Current > Term), or the lease row is gone (Current 0).
type FencedError struct {
	Lease   string
	Term    int64
	Current int64
}

func (e *FencedError) Error() string {
	msg := fmt.Sprintf("pgstore: write fenced: lease %q is at term %d, this writer holds term %d", e.Lease, e.Current, e.Term)
	if e.Current == 0 {
		msg += " (no one holds the lease: take it with Store.TryLead or Store.Campaign and fence writes with its Leader)"
	}
	return msg
}

// Is makes errors.Is(err, ErrFenced) true.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// LeaseHeldError says who holds the lease that TryLead could not take.
// Remaining is how long the lease has left by the clock that decides
// expiry (the database's unless LeaseOptions.Clock is set); it is zero or
// negative when the lease expired between the attempt and the read.
type LeaseHeldError struct {
	Lease     string
	Holder    string
	Term      int64
	ExpiresAt time.Time
	Remaining time.Duration
}

func (e *LeaseHeldError) Error() string {
	return fmt.Sprintf("pgstore: lease %q held by %s at term %d for another %v", e.Lease, e.Holder, e.Term, e.Remaining)
}

// Is makes errors.Is(err, ErrLeaseHeld) true.
func (e *LeaseHeldError) Is(target error) bool { return target == ErrLeaseHeld }
