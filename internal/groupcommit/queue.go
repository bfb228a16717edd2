package groupcommit

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
)

// ErrInvalidConfig is returned by New for a Config it cannot run.
var ErrInvalidConfig = errors.New("groupcommit: invalid config")

// ErrCommitPanicked is the error of every request of a batch whose Commit
// panicked or returned the wrong number of results: whether the batch was
// written is unknown.
var ErrCommitPanicked = errors.New("groupcommit: the commit panicked; whether the batch was written is unknown")

// Result is one request's outcome of a Commit: the value its caller gets,
// or the error that says why its request was not written.
type Result[Res any] struct {
	Value Res
	Err   error
}

// Config configures a Queue.
type Config[Req, Res any] struct {
	// Commit writes one batch of requests, in queue order, and returns one
	// Result per request, in the same order. Its context carries the
	// leading caller's values but is never cancelled by any caller; Commit
	// bounds its own work. Required.
	Commit func(ctx context.Context, batch []Req) []Result[Res]
	// Leaders is how many batches may commit at once. Default 1.
	Leaders int
	// MaxBatch caps the requests of one batch. Default 0: no cap.
	MaxBatch int
	// Weight, with MaxWeight, caps the total weight (bytes, say) of one
	// batch; a request heavier than MaxWeight still goes, alone. Default
	// nil: no cap.
	Weight func(Req) int
	// MaxWeight is the cap on a batch's total Weight. Default 0: no cap.
	MaxWeight int
}

// Queue is a group-commit queue. It starts no goroutine: the callers of
// Submit do all the work. It is safe for concurrent use.
type Queue[Req, Res any] struct {
	cfg Config[Req, Res]

	mu sync.Mutex
	// queue holds the requests not yet taken into a batch, oldest first.
	queue []*waiter[Req, Res]
	// slots is how many leader slots are held: by leaders taking or
	// committing a batch, and by promoted callers about to.
	slots int
}

// waiter is one Submit call.
type waiter[Req, Res any] struct {
	ctx context.Context
	req Req
	res Result[Res]
	// done is closed once res is set.
	done chan struct{}
	// turn gets a token when the caller is handed a leader slot.
	turn chan struct{}
	// Guarded by Queue.mu: taken once in a batch; promoted while the
	// caller holds a slot it has not used yet.
	taken, promoted bool
}

// New returns an empty queue.
func New[Req, Res any](cfg Config[Req, Res]) (*Queue[Req, Res], error) {
	switch {
	case cfg.Commit == nil:
		return nil, fmt.Errorf("%w: Commit is nil", ErrInvalidConfig)
	case cfg.Leaders < 0:
		return nil, fmt.Errorf("%w: Leaders %d is negative", ErrInvalidConfig, cfg.Leaders)
	case cfg.MaxBatch < 0:
		return nil, fmt.Errorf("%w: MaxBatch %d is negative", ErrInvalidConfig, cfg.MaxBatch)
	case cfg.MaxWeight < 0:
		return nil, fmt.Errorf("%w: MaxWeight %d is negative", ErrInvalidConfig, cfg.MaxWeight)
	}
	if cfg.Leaders == 0 {
		cfg.Leaders = 1
	}
	return &Queue[Req, Res]{cfg: cfg}, nil
}

// Submit queues req, has it committed in a batch, and returns its Result:
// Commit's verdict, or ctx's error when the request was withdrawn or
// dropped before its batch began (then it was not written). The package
// doc says when a caller whose ctx ends still waits.
func (q *Queue[Req, Res]) Submit(ctx context.Context, req Req) (Res, error) {
	var zero Res
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	w := &waiter[Req, Res]{ctx: ctx, req: req, done: make(chan struct{}), turn: make(chan struct{}, 1)}
	q.mu.Lock()
	q.queue = append(q.queue, w)
	if q.slots < q.cfg.Leaders { // a free slot: lead at once
		q.slots++
		batch := q.takeLocked()
		q.mu.Unlock()
		q.lead(ctx, w, batch)
	} else {
		q.mu.Unlock()
	}
	for {
		select {
		case <-w.done:
			// The usual way out, without the lock: w was handed a slot
			// before a batch took it or never will be, and no one but w
			// writes w.promoted once it is taken.
			if !w.promoted {
				return w.res.Value, w.res.Err
			}
		case <-w.turn:
		case <-ctx.Done():
		}
		q.mu.Lock()
		switch {
		case w.promoted:
			// Handed a slot: use it or pass it on, whichever of the three
			// fired, even when another leader has carried w meanwhile:
			// else the slot is lost and the queue may stall.
			w.promoted = false
			if ctx.Err() != nil { // do no work for others
				withdrawn := !w.taken
				if withdrawn {
					q.removeLocked(w)
				}
				q.handOffLocked()
				q.mu.Unlock()
				if withdrawn {
					return zero, ctx.Err()
				}
				continue // taken by another leader: wait for the outcome
			}
			batch := q.takeLocked()
			q.mu.Unlock()
			q.lead(ctx, w, batch)
			// w is in that batch, or in one under way, or still queued
			// behind a batch cap (and then maybe handed the slot again).
		case w.taken: // in a batch: its outcome is the answer
			q.mu.Unlock()
			<-w.done
			return w.res.Value, w.res.Err
		case ctx.Err() != nil: // still queued: withdraw
			q.removeLocked(w)
			q.mu.Unlock()
			return zero, ctx.Err()
		default:
			q.mu.Unlock()
		}
	}
}

// lead commits batch (taken with a slot held) for the caller w, then hands
// the slot on, whatever Commit does. Should Commit panic, the panic leaves
// w's Submit, so w leaves too, settled: withdrawn if no batch has taken
// it, else once its batch is done; any other slot it holds is passed on.
func (q *Queue[Req, Res]) lead(ctx context.Context, w *waiter[Req, Res], batch []*waiter[Req, Res]) {
	returned := false
	defer func() {
		q.mu.Lock()
		if !returned {
			if !w.taken {
				q.removeLocked(w)
			}
			if w.promoted {
				w.promoted = false
				q.handOffLocked()
			}
		}
		q.handOffLocked()
		taken := w.taken
		q.mu.Unlock()
		if !returned && taken {
			<-w.done
		}
	}()
	q.commit(ctx, batch)
	returned = true
}

// takeLocked removes the next batch from the head of the queue: up to
// MaxBatch requests and MaxWeight of weight, at least one if any is queued.
func (q *Queue[Req, Res]) takeLocked() []*waiter[Req, Res] {
	n, weight := 0, 0
	for n < len(q.queue) && (q.cfg.MaxBatch == 0 || n < q.cfg.MaxBatch) {
		if q.cfg.Weight != nil && q.cfg.MaxWeight > 0 {
			weight += q.cfg.Weight(q.queue[n].req)
			if n > 0 && weight > q.cfg.MaxWeight {
				break
			}
		}
		n++
	}
	var batch []*waiter[Req, Res]
	if n == len(q.queue) {
		batch, q.queue = q.queue, nil
	} else {
		batch = slices.Clone(q.queue[:n])
		q.queue = slices.Delete(q.queue, 0, n)
	}
	for _, w := range batch {
		w.taken = true
	}
	return batch
}

// removeLocked withdraws w from the queue.
func (q *Queue[Req, Res]) removeLocked(w *waiter[Req, Res]) {
	i := slices.Index(q.queue, w)
	q.queue = slices.Delete(q.queue, i, i+1)
}

// handOffLocked gives the caller's slot to the oldest queued caller that
// holds none, or gives it up when there is none. At most Leaders queued
// callers hold one, so the search is short.
func (q *Queue[Req, Res]) handOffLocked() {
	for _, w := range q.queue {
		if !w.promoted {
			w.promoted = true
			// Never blocks: a token left unread (w saw done or its ctx end
			// first) is left only by a caller that has left the queue, so
			// w has read any earlier one.
			w.turn <- struct{}{}
			return
		}
	}
	q.slots--
}

// commit answers every request of batch: those whose context has ended
// with its error, the others with Commit's results.
func (q *Queue[Req, Res]) commit(ctx context.Context, batch []*waiter[Req, Res]) {
	live := batch[:0] // the leader owns batch
	reqs := make([]Req, 0, len(batch))
	for _, w := range batch {
		if err := w.ctx.Err(); err != nil {
			w.answer(Result[Res]{Err: err})
			continue
		}
		live = append(live, w)
		reqs = append(reqs, w.req)
	}
	if len(live) == 0 {
		return
	}
	answered := false
	defer func() {
		if !answered { // Commit panicked: tell the callers, then let it go on
			for _, w := range live {
				w.answer(Result[Res]{Err: ErrCommitPanicked})
			}
		}
	}()
	results := q.cfg.Commit(context.WithoutCancel(ctx), reqs)
	if len(results) != len(live) {
		panic(fmt.Sprintf("groupcommit: Commit returned %d results for %d requests", len(results), len(live)))
	}
	for i, w := range live {
		w.answer(results[i])
	}
	answered = true
}

func (w *waiter[Req, Res]) answer(r Result[Res]) {
	w.res = r
	close(w.done)
}

// Queued is how many requests wait to be taken into a batch.
func (q *Queue[Req, Res]) Queued() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}

// Leading is how many leader slots are held: 0 when no batch is being
// committed and no caller is about to lead one.
func (q *Queue[Req, Res]) Leading() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.slots
}
