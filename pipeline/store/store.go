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
	// Versions never repeat for a (Kind, ID): a delete leaves a tombstone
	// that remembers the last version, and creating the record again
	// continues from it (deleted at 4, created again at 5). A writer that
	// read the record before the delete therefore gets a *ConflictError
	// rather than overwriting its successor. The one exception is a
	// tombstone removed with TombstonePurger: see there.
	Version int64
	// Data is the document, usually JSON; the store does not interpret it.
	// Records returned by a store own their Data: callers may change it
	// without affecting the store.
	Data []byte
	// UpdatedAt is when the write that produced this version was applied,
	// read from the store's clock, in UTC without a monotonic reading. Get
	// and List return the same instant that Apply returned (compare with
	// Equal: a store may keep less than nanosecond precision).
	UpdatedAt time.Time
}

// Op is one write of an Apply.
type Op struct {
	Kind string
	ID   string
	// ExpectVersion is the version the record must have for the write to
	// happen: 0 means the record must not exist, either because it was never
	// written or because it was deleted (a create of a deleted record gets
	// the tombstone's version + 1). Any mismatch aborts the whole Apply with
	// a *ConflictError; a deleted record matches only 0, never its last
	// version. A Delete needs ExpectVersion >= 1.
	ExpectVersion int64
	// Data is the new content; ignored when Delete is set. The store copies
	// it: the caller may reuse the slice once Apply returns.
	Data   []byte
	Delete bool
}

// Store is a versioned document store. Implementations are safe for
// concurrent use; a durable one (pipeline/sqlitestore) also lets readers in
// other processes read while one writer applies changes.
type Store interface {
	// Get returns one record, or an error matching ErrNotFound.
	Get(ctx context.Context, kind, id string) (Record, error)
	// List returns every record of a kind, ordered by ID byte-wise (Go
	// string order), from one consistent snapshot.
	List(ctx context.Context, kind string) ([]Record, error)
	// Apply performs all ops atomically: either every op is written (and
	// the new records are returned, in op order) or none is and the error
	// says why. A deleted record is returned with Version 0 and no Data, as
	// a record that does not exist (the tombstone's version is kept inside
	// the store, where only the next create uses it). Two ops on the same
	// record in one Apply are an error matching ErrInvalidOp, as is any op
	// ValidateOps rejects. When several ops conflict, the
	// *ConflictError names the first in op order. An Apply without ops
	// writes nothing and returns no records.
	Apply(ctx context.Context, ops ...Op) ([]Record, error)
	// Close releases the store; it is safe to call twice (the second call
	// returns nil). Calls after Close fail with ErrClosed.
	Close() error
}

// Errors every Store returns (matched with errors.Is).
var (
	ErrNotFound  = errors.New("store: record not found")
	ErrConflict  = errors.New("store: version conflict")
	ErrInvalidOp = errors.New("store: invalid op")
	ErrClosed    = errors.New("store: closed")
)

// ConflictError says which record did not have the expected version. The
// Apply that returns it wrote nothing.
type ConflictError struct {
	Kind     string
	ID       string
	Expected int64
	Actual   int64 // 0 when the record does not exist (never written, or deleted)
}

func (e *ConflictError) Error() string {
	return fmt.Sprintf("store: version conflict on %s/%s: expected %d, found %d", e.Kind, e.ID, e.Expected, e.Actual)
}

// Is makes errors.Is(err, ErrConflict) true.
func (e *ConflictError) Is(target error) bool { return target == ErrConflict }

// TombstonePurger is implemented by stores that can forget tombstones.
// Every delete leaves one (a few dozen bytes: kind, id, last version and the
// time of the delete) until the record is created again; a host that
// deletes many distinct records can purge the old ones.
//
// Purging gives up the guarantee that versions never repeat for the purged
// records: one created again after its tombstone is purged starts over at 1,
// so a writer still holding a version it read before the delete could match
// it again. Choose deletedBefore older than any read a writer may still act
// on: for example, older than the start of every process that writes the
// store, when no version is kept anywhere else.
type TombstonePurger interface {
	// PurgeTombstones forgets the tombstones of records deleted strictly
	// before deletedBefore (the UpdatedAt that Apply returned for the
	// delete) and returns how many it removed. Live records are untouched.
	PurgeTombstones(ctx context.Context, deletedBefore time.Time) (int, error)
}

// ValidateOps checks a batch before any of it is applied: every op needs a
// Kind and an ID, ExpectVersion is never negative, a Delete expects an
// existing version (>= 1), and no two ops name the same record. The error
// matches ErrInvalidOp. Implementations call it first, so that every store
// rejects the same batches the same way.
func ValidateOps(ops []Op) error {
	type key struct{ kind, id string }
	seen := make(map[key]struct{}, len(ops))
	for i, op := range ops {
		switch {
		case op.Kind == "" || op.ID == "":
			return fmt.Errorf("%w: op %d has an empty kind or id (%q/%q)", ErrInvalidOp, i, op.Kind, op.ID)
		case op.ExpectVersion < 0:
			return fmt.Errorf("%w: op %d on %s/%s expects negative version %d", ErrInvalidOp, i, op.Kind, op.ID, op.ExpectVersion)
		case op.Delete && op.ExpectVersion == 0:
			return fmt.Errorf("%w: op %d deletes %s/%s without an expected version", ErrInvalidOp, i, op.Kind, op.ID)
		}
		k := key{op.Kind, op.ID}
		if _, dup := seen[k]; dup {
			return fmt.Errorf("%w: two ops on %s/%s in one Apply", ErrInvalidOp, op.Kind, op.ID)
		}
		seen[k] = struct{}{}
	}
	return nil
}
