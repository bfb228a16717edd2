package pgstore

import (
	"context"
	"slices"
	"sync"

	"github.com/agentforeman/foreman/pipeline/store"
)

// groupCommit queues concurrent Applies so that one database call writes
// many. There is no background goroutine: an Apply that finds fewer than
// `writers` group commits in flight writes one itself, taking whatever is
// queued (itself first); when it is done it hands the turn to the oldest
// waiting Apply, which writes the next one. Under load, then, each call
// carries everything that queued up during the previous one.
type groupCommit struct {
	maxBatch, writers int

	mu      sync.Mutex
	queue   []*request
	running int
}

type request struct {
	ops   []store.Op
	fence fence
	bytes int

	// Set by whoever writes the request's group commit, before done closes.
	recs []store.Record
	err  error
	done chan struct{}

	// turn closes when this request is to write the next group commit; it
	// is still queued then, at the head. Guarded by groupCommit.mu.
	turn     chan struct{}
	promoted bool
}

// submit queues req and returns its outcome. A caller whose context ends
// while req is still queued withdraws it; once its group commit is on its
// way, the caller waits for the outcome (bounded by Options.WriteTimeout),
// so that it never reports a failure for a write that landed.
func (s *Store) submit(ctx context.Context, req *request) ([]store.Record, error) {
	g := &s.group
	g.mu.Lock()
	g.queue = append(g.queue, req)
	if g.running < g.writers {
		g.running++
		batch := g.takeLocked() // the oldest queued first, so maybe not req
		g.mu.Unlock()
		s.commitAndHandOff(batch)
	} else {
		g.mu.Unlock()
	}

	select {
	case <-req.done:
	case <-req.turn:
	case <-ctx.Done():
		g.mu.Lock()
		if i := slices.Index(g.queue, req); i >= 0 && !req.promoted {
			g.queue = slices.Delete(g.queue, i, i+1)
			g.mu.Unlock()
			return nil, ctx.Err()
		}
		g.mu.Unlock()
		// Already in a group commit under way, or promoted.
	}
	// A promoted request holds a writer slot and must use it, even when
	// another writer (with a free slot) has carried req meanwhile: else the
	// slot is lost and the queue stalls. Only queue[0] is ever promoted, so
	// a request that is done without being promoted never will be.
	g.mu.Lock()
	promoted := req.promoted
	var batch []*request
	if promoted {
		batch = g.takeLocked()
	}
	g.mu.Unlock()
	if promoted {
		s.commitAndHandOff(batch)
	}
	<-req.done
	return req.recs, req.err
}

// takeLocked removes the next group commit from the head of the queue: up
// to maxBatch requests and maxBatchBytes of documents (at least one).
func (g *groupCommit) takeLocked() []*request {
	n, bytes := 0, 0
	for n < len(g.queue) && n < g.maxBatch {
		bytes += g.queue[n].bytes
		if n > 0 && bytes > maxBatchBytes {
			break
		}
		n++
	}
	batch := slices.Clone(g.queue[:n])
	g.queue = slices.Delete(g.queue, 0, n)
	return batch
}

// commitAndHandOff writes batch, releases its callers, and passes the turn
// to the oldest queued request, or gives up the writer slot when none is.
func (s *Store) commitAndHandOff(batch []*request) {
	if len(batch) > 0 {
		s.runBatch(batch)
		for _, r := range batch {
			close(r.done)
		}
	}
	g := &s.group
	g.mu.Lock()
	defer g.mu.Unlock()
	if len(g.queue) > 0 && !g.queue[0].promoted {
		g.queue[0].promoted = true
		close(g.queue[0].turn)
		return
	}
	g.running--
}
