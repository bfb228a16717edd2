package pgstore

import (
	"context"

	"github.com/agentforeman/foreman/internal/groupcommit"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Group commit: concurrent Applies queue on a group-commit queue
// (internal/groupcommit) so that one database call writes many. There is
// no background goroutine: an Apply that finds fewer than Options.Writers
// group commits in flight writes one itself, taking whatever is queued
// (oldest first, up to MaxBatch Applies and maxBatchBytes of documents);
// when it is done it hands its turn to the oldest waiting Apply, which
// writes the next one. Under load, then, each call carries everything that
// queued up during the previous one. The queue's doc has the cancellation
// rules: a caller still queued when its context ends withdraws; once its
// group commit is on its way, the caller waits for the outcome (bounded by
// Options.WriteTimeout), so that it never reports a failure for a write
// that landed.

// request is one Apply waiting for a group commit.
type request struct {
	ops   []store.Op
	fence fence
	bytes int

	// Set by the group commit that carries the request.
	recs []store.Record
	err  error
}

type applyQueue = groupcommit.Queue[*request, []store.Record]

func newApplyQueue(s *Store, maxBatch, writers int) *applyQueue {
	q, err := groupcommit.New(groupcommit.Config[*request, []store.Record]{
		Commit:    s.commitBatch,
		Leaders:   writers,
		MaxBatch:  maxBatch,
		Weight:    func(r *request) int { return r.bytes },
		MaxWeight: maxBatchBytes,
	})
	if err != nil {
		panic(err) // Options.validate has ruled out negative sizes
	}
	return q
}

// commitBatch writes one group commit and returns each request's outcome.
func (s *Store) commitBatch(ctx context.Context, batch []*request) []groupcommit.Result[[]store.Record] {
	s.runBatch(ctx, batch)
	out := make([]groupcommit.Result[[]store.Record], len(batch))
	for i, r := range batch {
		out[i] = groupcommit.Result[[]store.Record]{Value: r.recs, Err: r.err}
	}
	return out
}
