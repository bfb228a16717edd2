package sqlitestore

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"

	"github.com/agentforeman/foreman/pipeline/store"
)

// Group commit. A commit costs one fsync of the WAL, and the disk does a few
// thousand of those a second at best, so concurrent Apply calls share them:
// every call queues its request; the caller that finds no commit in flight
// leads, taking everything queued into one transaction, and those that
// arrive meanwhile wait for the next one. There is no timer: a lone writer
// finds the queue idle and commits at once, and a batch is whatever queued
// while the previous commit ran. Once its own request is done a leader hands
// the lead to the oldest waiter, so that no caller serves others for long.
//
// Inside the transaction each request runs in turn, the way it would have
// alone: a multi-op request under a savepoint, so that a conflict rolls back
// that request's ops and no one else's. A failing statement aborts the
// transaction; the failing request gets the error, and the others are tried
// again in a new one. Only a failed BEGIN or COMMIT fails every request of
// the batch, because then none of them was written.

// applyRequest is one Apply call waiting for a commit.
type applyRequest struct {
	ctx  context.Context
	ops  []store.Op
	recs []store.Record
	err  error
	// done is closed once recs and err are set.
	done chan struct{}
	// promote receives when the request's caller is to lead the next batch.
	promote chan struct{}
	// taken and promoted are guarded by committer.mu.
	taken, promoted bool
}

// committer is the queue of requests and the state of the lead.
type committer struct {
	mu      sync.Mutex
	queue   []*applyRequest
	leading bool // a caller is running a batch or about to

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
	return WriteStats{Commits: s.group.commits.Load(), Applies: s.group.applies.Load(), Ops: s.group.ops.Load()}
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
	req := &applyRequest{ctx: ctx, ops: ops, done: make(chan struct{}), promote: make(chan struct{}, 1)}
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if !g.leading {
		g.leading = true
		g.mu.Unlock()
		s.lead()
	} else {
		g.mu.Unlock()
	}
	select {
	case <-req.done:
	case <-req.promote:
		s.lead()
	case <-ctx.Done():
		g.mu.Lock()
		switch {
		case req.promoted: // the lead came with the cancellation: take it
			g.mu.Unlock()
			s.lead()
		case !req.taken:
			g.queue = slices.DeleteFunc(g.queue, func(r *applyRequest) bool { return r == req })
			g.mu.Unlock()
			return nil, ctx.Err()
		default: // in a batch already: its outcome is the answer
			g.mu.Unlock()
		}
	}
	<-req.done
	return req.recs, req.err
}

// lead commits everything queued, the leader's own request included, then
// hands the lead to the oldest waiter, or gives it up when nobody waits.
func (s *Store) lead() {
	g := &s.group
	g.mu.Lock()
	batch := g.queue // the leader's own request is in it
	g.queue = nil
	for _, r := range batch {
		r.taken = true
	}
	g.mu.Unlock()
	s.commitBatch(batch)

	g.mu.Lock()
	if len(g.queue) == 0 {
		g.leading = false
		g.mu.Unlock()
		return
	}
	next := g.queue[0]
	next.promoted = true
	g.mu.Unlock()
	next.promote <- struct{}{}
}

// commitBatch writes the batch's requests and answers each of them.
func (s *Store) commitBatch(batch []*applyRequest) {
	pending := make([]*applyRequest, 0, len(batch))
	for _, r := range batch {
		if err := r.ctx.Err(); err != nil {
			s.answer(r, nil, err)
			continue
		}
		pending = append(pending, r)
	}
	// The transaction must not die with one caller's context: database/sql
	// rolls a transaction back when its context ends, and SQLite's
	// interrupt aborts the whole transaction, other callers' ops included.
	ctx := context.WithoutCancel(batch[0].ctx)
	for len(pending) > 0 {
		results, failed, err := s.runBatch(ctx, pending)
		if failed < 0 {
			for i, r := range pending {
				if err != nil {
					s.answer(r, nil, err)
				} else {
					s.answer(r, results[i].recs, results[i].err)
				}
			}
			return
		}
		// One request's statement failed and the transaction was rolled
		// back: that request gets the error, the others go again.
		s.answer(pending[failed], nil, err)
		pending = slices.Delete(pending, failed, failed+1)
	}
}

type requestResult struct {
	recs []store.Record
	err  error // a *store.ConflictError; nothing of the request was written
}

// runBatch runs one transaction over reqs. failed is the index of a
// request whose statement failed with err (the transaction is rolled
// back), or -1: then err is nil when the transaction committed, or the
// BEGIN or COMMIT error that kept all of them from being written.
func (s *Store) runBatch(ctx context.Context, reqs []*applyRequest) (results []requestResult, failed int, err error) {
	tx, err := s.writer.BeginTx(ctx, nil)
	if err != nil {
		return nil, -1, s.fail("begin", err)
	}
	defer func() { _ = tx.Rollback() }()
	results = make([]requestResult, len(reqs))
	w := txWriter{ctx: ctx, tx: tx, prepared: &s.stmts}
	acknowledged, ops := int64(0), int64(0)
	for i, r := range reqs {
		recs, conflict, err := w.applyRequest(r.ops, s.clock.Now().UnixNano())
		if err != nil {
			return nil, i, s.fail("apply", err)
		}
		if conflict != nil {
			err := s.conflict(ctx, tx, *conflict)
			if !errors.Is(err, store.ErrConflict) {
				return nil, i, err
			}
			results[i].err = err
			continue
		}
		results[i].recs = recs
		acknowledged++
		ops += int64(len(recs))
	}
	if err := tx.Commit(); err != nil {
		return nil, -1, s.fail("commit", err)
	}
	s.group.commits.Add(1)
	s.group.applies.Add(acknowledged)
	s.group.ops.Add(ops)
	return results, -1, nil
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

// answer hands a request its outcome and wakes its caller.
func (s *Store) answer(r *applyRequest, recs []store.Record, err error) {
	r.recs, r.err = recs, err
	close(r.done)
}
