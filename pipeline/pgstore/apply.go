package pgstore

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/agentforeman/foreman/pipeline/store"
)

// fence makes an Apply conditional on a lease term; the zero fence is none.
type fence struct {
	lease string
	term  int64
}

// Apply implements store.Store. Concurrent Applies are group-committed: one
// call to the database function carries up to Options.MaxBatch of them,
// each in its own subtransaction, so that a conflict in one rolls back that
// one only, and all of them share one transaction and one WAL flush.
func (s *Store) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	return s.apply(ctx, fence{}, ops)
}

func (s *Store) apply(ctx context.Context, f fence, ops []store.Op) ([]store.Record, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	if err := store.ValidateOps(ops); err != nil {
		return nil, err
	}
	if err := validateText(ops); err != nil {
		return nil, err
	}
	leave, err := s.enter()
	if err != nil {
		return nil, err
	}
	defer leave()
	if len(ops) == 0 {
		return []store.Record{}, nil
	}
	req := &request{ops: ops, fence: f}
	for _, op := range ops {
		req.bytes += len(op.Data)
	}
	return s.group.Submit(ctx, req)
}

// runBatch writes one group commit and fills in every request's outcome.
// A batch that the server refused as a whole (not a conflict: a statement
// it rejected, a deadlock that outlasted the retries) wrote nothing and is
// retried request by request, so that one bad request cannot fail the
// others and each gets its own error. A batch whose outcome is unknown (the
// connection broke after it was sent) is not retried: every request of it
// gets the error, since retrying could report a conflict for a write that
// landed. ctx is no caller's (see group.go); WriteTimeout bounds the call.
func (s *Store) runBatch(ctx context.Context, batch []*request) {
	if s.beforeWrite != nil {
		s.beforeWrite(len(batch))
	}
	s.stats.record(len(batch))
	ctx, cancel := context.WithTimeout(ctx, s.timeout)
	defer cancel()
	err := s.writeBatch(ctx, batch)
	if err == nil {
		return
	}
	if len(batch) == 1 || ctx.Err() != nil || !rolledBack(err) {
		for _, r := range batch {
			r.recs, r.err = nil, s.fail("apply", err)
		}
		return
	}
	for _, r := range batch {
		if err := s.writeBatch(ctx, []*request{r}); err != nil {
			r.recs, r.err = nil, s.fail("apply", err)
		}
	}
}

// writeBatch makes one call of apply_batch for the requests. Deadlocks and
// serialization failures abort the whole transaction, so they are retried
// a few times.
func (s *Store) writeBatch(ctx context.Context, batch []*request) error {
	at := s.stamp()
	args := batchArgs(at, batch)
	var err error
	for attempt := 0; attempt < 3; attempt++ {
		err = s.callApply(ctx, at, batch, args)
		if !retryable(err) {
			return err
		}
	}
	return err
}

func (s *Store) callApply(ctx context.Context, at time.Time, batch []*request, args []any) error {
	rows, err := s.pool.Query(ctx, s.sql.apply, args...)
	if err != nil {
		return err
	}
	defer rows.Close()
	type outcome struct {
		batch       int32
		kind        string
		versions    []int64
		conflictOp  *int32
		actual      *int64
		currentTerm *int64
	}
	outcomes := make([]outcome, 0, len(batch))
	for rows.Next() {
		var o outcome
		if err := rows.Scan(&o.batch, &o.kind, &o.versions, &o.conflictOp, &o.actual, &o.currentTerm); err != nil {
			return err
		}
		outcomes = append(outcomes, o)
	}
	if err := rows.Err(); err != nil {
		return err
	}
	if len(outcomes) != len(batch) {
		return fmt.Errorf("apply_batch returned %d outcomes for %d batches", len(outcomes), len(batch))
	}
	for i, o := range outcomes {
		r := batch[i]
		switch o.kind {
		case "ok":
			if len(o.versions) != len(r.ops) {
				return fmt.Errorf("apply_batch returned %d versions for %d ops", len(o.versions), len(r.ops))
			}
			r.recs, r.err = records(r.ops, o.versions, at), nil
		case "conflict":
			op := r.ops[deref(o.conflictOp)]
			r.recs, r.err = nil, &store.ConflictError{Kind: op.Kind, ID: op.ID, Expected: op.ExpectVersion, Actual: deref(o.actual)}
		case "fenced":
			r.recs, r.err = nil, &FencedError{Lease: r.fence.lease, Term: r.fence.term, Current: deref(o.currentTerm)}
		default:
			return fmt.Errorf("apply_batch returned outcome %q", o.kind)
		}
	}
	return nil
}

// batchArgs flattens the requests into apply_batch's arrays: one entry per
// op (numbered by request, from 1) and one fence per request.
func batchArgs(at time.Time, batch []*request) []any {
	n := 0
	for _, r := range batch {
		n += len(r.ops)
	}
	nums := make([]int32, 0, n)
	kinds := make([]string, 0, n)
	ids := make([]string, 0, n)
	expects := make([]int64, 0, n)
	datas := make([][]byte, 0, n)
	deletes := make([]bool, 0, n)
	leases := make([]string, len(batch))
	terms := make([]int64, len(batch))
	for i, r := range batch {
		for _, op := range r.ops {
			nums = append(nums, int32(i+1))
			kinds = append(kinds, op.Kind)
			ids = append(ids, op.ID)
			expects = append(expects, op.ExpectVersion)
			datas = append(datas, nonNil(op.Data))
			deletes = append(deletes, op.Delete)
		}
		leases[i], terms[i] = r.fence.lease, r.fence.term
	}
	return []any{at, nums, kinds, ids, expects, datas, deletes, leases, terms}
}

func records(ops []store.Op, versions []int64, at time.Time) []store.Record {
	out := make([]store.Record, len(ops))
	for i, op := range ops {
		out[i] = store.Record{Kind: op.Kind, ID: op.ID, UpdatedAt: at}
		if !op.Delete {
			out[i].Version = versions[i]
			out[i].Data = append([]byte{}, op.Data...)
		}
	}
	return out
}

// rolledBack: the server answered with an error, so the statement's
// transaction wrote nothing; or pgx never sent it.
func rolledBack(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) || pgconn.SafeToRetry(err)
}

// retryable: PostgreSQL aborted the whole transaction because of other
// transactions (deadlock, serialization failure), so nothing was written
// and the same call may succeed.
func retryable(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && (pe.Code == "40P01" || pe.Code == "40001")
}

func deref[T any](p *T) T {
	var zero T
	if p == nil {
		return zero
	}
	return *p
}
