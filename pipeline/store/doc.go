// Package store is the durable state behind the pipeline: a small,
// versioned document store with optimistic concurrency. The coordinator
// keeps each item's state (and the effects it has yet to carry out) in one
// record, so persisting a transition is one atomic Apply.
//
// # Contract
//
// A Record is identified by (Kind, ID) and carries opaque Data, a Version
// and the time of its last write. Apply takes a batch of Ops and writes all
// of them or none:
//
//   - every Op states the version it expects (ExpectVersion 0: the record
//     must not exist yet), so two writers that read the same version cannot
//     both win: the loser gets a *ConflictError (errors.Is ErrConflict) with
//     the expected and actual versions, and nothing of its batch is written;
//   - versions start at 1, grow by one per write and never repeat for a
//     (Kind, ID): a delete leaves a tombstone holding the last version, and
//     creating the record again (ExpectVersion 0) continues from it, so a
//     writer that read the record before the delete gets a conflict instead
//     of overwriting its successor (the ABA problem);
//   - a deleted record does not exist for every other purpose: Get reports
//     ErrNotFound, List omits it, a write or delete that expects its last
//     version conflicts with Actual 0, and Apply returns the delete with
//     Version 0;
//   - malformed batches (empty kind or id, a negative version, a delete
//     without an expected version, two ops on one record) fail with
//     ErrInvalidOp before anything is looked at (ValidateOps);
//   - data is copied in and out: neither the slices passed to Apply nor
//     those returned by Get, List and Apply alias what the store holds;
//   - List returns one kind's records ordered by ID;
//   - a cancelled context fails the call; Close is idempotent and later
//     calls fail with ErrClosed.
//
// # Tombstones
//
// A tombstone costs a few dozen bytes (kind, id, version, time of the
// delete) and lasts until its record is created again, so a host that
// deletes many distinct records grows without bound. A store may implement
// TombstonePurger to forget the tombstones of records deleted before a
// cutoff; both stores here do. A record created again after its tombstone
// was purged starts over at 1, which is safe only when no writer still
// holds a version read before the cutoff.
//
// # Implementations
//
// Memory, in this package, keeps everything in process memory behind a
// mutex (a map per kind, each record one string of its version, time and
// data): for tests and for hosts that need no durability. The durable default is
// pipeline/sqlitestore (its own package, so that hosts that bring their own
// store do not compile SQLite). Every implementation must pass the
// conformance suite in pipeline/store/storetest.
package store
