package sqlitestore

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"

	"github.com/agentforeman/foreman/internal/groupcommit"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Group commit. A commit costs one fsync of the WAL, and the disk does a few
// thousand of those a second at best, so concurrent Apply calls share them
// through a group-commit queue (internal/groupcommit, one leader: SQLite
// has one writer): the caller that finds no commit in flight leads, taking
// everything queued into one transaction, and those that arrive meanwhile
// wait for the next one, led by the oldest of them. There is no timer: a
// lone writer finds the queue idle and commits at once. The queue's doc has
// the cancellation rules: a caller still queued when its ctx ends
// withdraws; one whose transaction has begun waits for its outcome, which
// its ctx cannot abort (database/sql would roll the transaction back, and
// SQLite's interrupt would abort other callers' ops with it).
//
// Inside the transaction each request runs in turn, the way it would have
// alone: a multi-op request under a savepoint, so that a conflict rolls back
// that request's ops and no one else's. A failing statement aborts the
// transaction; the failing request gets the error, and the others are tried
// again in a new one. Only a failed BEGIN or COMMIT fails every request of
// the batch, because then none of them was written.

// applyQueue is the group-commit queue of Apply calls: each request is one
// call's ops, each result its records.
type applyQueue = groupcommit.Queue[[]store.Op, []store.Record]

func newApplyQueue(s *Store) *applyQueue {
	q, err := groupcommit.New(groupcommit.Config[[]store.Op, []store.Record]{Commit: s.commitBatch})
	if err != nil {
		panic(err) // the Config above is valid
	}
	return q
}

// writeCounters count what the Store wrote.
type writeCounters struct {
	commits atomic.Int64 // transactions committed
	applies atomic.Int64 // requests acknowledged
	ops     atomic.Int64 // ops of acknowledged requests
}

// WriteStats counts the writes of a Store since it was opened.
type WriteStats struct {
	// Commits is the number of transactions committed: one fsync of the
	// WAL each (synchronous=FULL), plus those of SQLite's checkpoints.
	Commits int64
	// Applies is the number of Apply calls acknowledged (written), and Ops
	// the number of their ops. Applies/Commits is how many callers share a
	// commit.
	Applies int64
	Ops     int64
}

// WriteStats returns the write counters.
func (s *Store) WriteStats() WriteStats {
	return WriteStats{Commits: s.writes.commits.Load(), Applies: s.writes.applies.Load(), Ops: s.writes.ops.Load()}
}

// Apply implements store.Store: the ops are written in one immediate
// transaction, committed with a full fsync of the WAL, which concurrent
// calls share (group commit); a conflict fails this call only.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateOps(ops); err != nil {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if s.readOnly {
		return nil, ErrReadOnly
	}
	if len(ops) == 0 {
		return []store.Record{}, nil
	}
	return s.group.Submit(ctx, ops)
}

// applyResult is one request's outcome.
type applyResult = groupcommit.Result[[]store.Record]

// commitBatch writes a batch of requests, each its own ops, and returns
// each one's outcome. ctx is no caller's: see Group commit above.
func (s *Store) commitBatch(ctx context.Context, batch [][]store.Op) []applyResult {
	out := make([]applyResult, len(batch))
	pending := make([]int, len(batch)) // indexes into batch
	for i := range pending {
		pending[i] = i
	}
	for len(pending) > 0 {
		failed, err := s.runBatch(ctx, batch, pending, out)
		if failed < 0 {
			if err != nil {
				for _, i := range pending {
					out[i] = applyResult{Err: err}
				}
			}
			return out
		}
		// One request's statement failed and the transaction was rolled
		// back: that request gets the error, the others go again.
		out[pending[failed]] = applyResult{Err: err}
		pending = slices.Delete(pending, failed, failed+1)
	}
	return out
}

// runBatch runs one transaction over the pending requests of batch,
// setting their outcomes in out. failed is the index in pending of a
// request whose statement failed with err (the transaction is rolled
// back, and out of the others is to be set again), or -1: then err is nil
// when the transaction committed, or the BEGIN or COMMIT error that kept
// all of them from being written. An outcome's error is a
// *store.ConflictError: nothing of that request was written.
func (s *Store) runBatch(ctx context.Context, batch [][]store.Op, pending []int, out []applyResult) (failed int, err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return -1, s.fail("begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	w := txWriter{ctx: ctx, tx: tx, prepared: &s.stmts}
	acknowledged, ops := int64(0), int64(0)
	for j, i := range pending {
		recs, conflict, err := w.applyRequest(batch[i], s.clock.Now().UnixNano())
		if err != nil {
			return j, s.fail("apply", err)
		}
		if conflict != nil {
			err := s.conflict(ctx, tx, *conflict)
			if !errors.Is(err, store.ErrConflict) {
				return j, err
			}
			out[i] = applyResult{Err: err}
			continue
		}
		out[i] = applyResult{Value: recs}
		acknowledged++
		ops += int64(len(recs))
	}
	if err := tx.Commit(); err != nil {
		return -1, s.fail("commit", err)
	}
	s.writes.commits.Add(1)
	s.writes.applies.Add(acknowledged)
	s.writes.ops.Add(ops)
	return -1, nil
}

// applyRequest writes one request's ops; on a conflict it undoes them and
// returns the op that conflicted.
func (w *txWriter) applyRequest(ops []store.Op, nanos int64) (recs []store.Record, conflict *store.Op, err error) {
	w.nanos = nanos
	// A lone op that conflicts has written nothing, so only batches of
	// several need a savepoint to undo the ops before the conflicting one.
	multi := len(ops) > 1
	if multi {
		if _, err := w.bind(&w.bound.savepoint, w.prepared.savepoint).ExecContext(w.ctx); err != nil {
			return nil, nil, err
		}
	}
	now := fromNanos(nanos)
	out := make([]store.Record, len(ops))
	for i, op := range ops {
		var version int64
		var ok bool
		switch {
		case op.Delete:
			ok, err = w.delete(op)
		case op.ExpectVersion == 0:
			version, ok, err = w.create(op)
		default:
			version, ok, err = w.update(op)
		}
		if err != nil {
			return nil, nil, err
		}
		if !ok {
			if multi {
				if _, err := w.bind(&w.bound.rollbackTo, w.prepared.rollbackTo).ExecContext(w.ctx); err != nil {
					return nil, nil, err
				}
				if _, err := w.bind(&w.bound.release, w.prepared.release).ExecContext(w.ctx); err != nil {
					return nil, nil, err
				}
			}
			return nil, &ops[i], nil
		}
		out[i] = store.Record{Kind: op.Kind, ID: op.ID, UpdatedAt: now}
		if !op.Delete {
			out[i].Version = version
			out[i].Data = append([]byte{}, op.Data...)
		}
	}
	if multi {
		if _, err := w.bind(&w.bound.release, w.prepared.release).ExecContext(w.ctx); err != nil {
			return nil, nil, err
		}
	}
	return out, nil, nil
}
