// Package store is the durable state behind the pipeline: a small,
// versioned document store with optimistic concurrency. The coordinator
// keeps each item's state (and the effects it has yet to carry out) in one
// record, so persisting a transition is one atomic Apply.
//
// Implementations: Memory in this package (tests, embedding), and the
// durable SQLite store in pipeline/sqlitestore (its own package, so hosts
// that bring their own store do not compile SQLite). Every implementation
// must pass the conformance suite in pipeline/store/storetest.
package store

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Record is one versioned document.
type Record struct {
	// Kind groups records ("item", "task", "session", ...); ID is unique
	// within a kind.
	Kind string
	ID   string
	// Version is 1 after the first write and grows by one with each write.
	Version int64
	// Data is the document, usually JSON; the store does not interpret it.
	Data      []byte
	UpdatedAt time.Time
}

// Op is one write of an Apply.
type Op struct {
	Kind string
	ID   string
	// ExpectVersion is the version the record must have for the write to
	// happen: 0 means the record must not exist yet. Any mismatch aborts the
	// whole Apply with a *ConflictError.
	ExpectVersion int64
	// Data is the new content; ignored when Delete is set.
	Data   []byte
	Delete bool
}

// Store is a versioned document store. Implementations are safe for
// concurrent use; readers may run in other processes while one writer
// applies changes.
type Store interface {
	// Get returns one record, or an error matching ErrNotFound.
	Get(ctx context.Context, kind, id string) (Record, error)
	// List returns every record of a kind, ordered by ID.
	List(ctx context.Context, kind string) ([]Record, error)
	// Apply performs all ops atomically: either every op is written (and
	// the new records are returned, in op order; a deleted record is
	// returned with Version 0) or none is and the error says why. Two ops
	// on the same record in one Apply are an error matching ErrInvalidOp.
	Apply(ctx context.Context, ops ...Op) ([]Record, error)
	// Close releases the store; it is safe to call twice. Calls after
	// Close fail with ErrClosed.
	Close() error
}

// Errors every Store returns (matched with errors.Is).
var (
	ErrNotFound  = errors.New("store: record not found")
	ErrConflict  = errors.New("store: version conflict")
	ErrInvalidOp = errors.New("store: invalid op")
	ErrClosed    = errors.New("store: closed")
)

// ConflictError says which record did not have the expected version.
type ConflictError struct {
	Kind     string
	ID       string
	Expected int64
	Actual   int64 // 0 when the record does not exist
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: version conflict on %s/%s: expected %d, found %d", e.Kind, e.ID, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }
