package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Test50Workers500Items runs 500 items through 50 pooled workers with an
// in-process agent that succeeds, fails (requeue) or asks for review, with
// reviews and late duplicate messages racing them. It checks, from the
// ordered event stream, that no item is assigned twice at once, and at the
// end that every item completed exactly once and no worker is left busy.
func Test50Workers500Items(t *testing.T) {
	const workers, items = 50, 500
	var (
		mu        sync.Mutex
		holder    = map[foreman.ItemID]foreman.AssignmentID{}
		completed = map[foreman.ItemID]int{}
		errs      []string
		reviews   = make(chan worker.Event, items*4)
		allDone   = make(chan struct{})
	)
	hook := func(e worker.Event) {
		mu.Lock()
		defer mu.Unlock()
		switch e.Kind {
		case worker.EventAssigned:
			if cur, ok := holder[e.Item]; ok {
				errs = append(errs, fmt.Sprintf("%s assigned as %s while %s holds it", e.Item, e.Assignment, cur))
			}
			holder[e.Item] = e.Assignment
		case worker.EventRequeued, worker.EventParked, worker.EventReviewRejected:
			delete(holder, e.Item)
		case worker.EventCompleted:
			delete(holder, e.Item)
			completed[e.Item]++
			if len(completed) == items {
				close(allDone)
			}
		case worker.EventReviewRequested:
			reviews <- e
		}
	}
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		on(phases.StreamEvent{Line: "working"})
		rngMu.Lock()
		fail := rng.IntN(10) == 0 && req.Iteration < 3
		rngMu.Unlock()
		return phases.AgentResult{Success: !fail, ExitCode: map[bool]int{true: 1}[fail]}, nil
	})
	d, err := worker.New(worker.Config{MaxWorkers: workers, Agent: agent, Commits: worker.NoCommits,
		CrashBudget: 5, OnEvent: hook})
	require.NoError(t, err)
	defer d.Close()

	// A reviewer approving (or once rejecting) every review request, then
	// replaying the verdict as a late duplicate.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-reviews:
				v := worker.Verdict{Worker: e.Worker, Assignment: e.Assignment, Approved: e.Attempt > 1, Feedback: "again"}
				_, _ = d.Review(ctx, v)
				_, _ = d.Deliver(ctx, worker.Message{Kind: worker.MsgDone, Worker: e.Worker, Assignment: e.Assignment})
			}
		}
	})

	var submit sync.WaitGroup
	for g := range 5 {
		submit.Go(func() {
			for i := g; i < items; i += 5 {
				it := worker.Item{ID: foreman.ItemID(fmt.Sprintf("item-%03d", i)), Priority: i % 3, RequireReview: i%7 == 0}
				assert.NoError(t, d.Submit(context.Background(), it))
			}
		})
	}
	submit.Wait()
	select {
	case <-allDone:
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		t.Fatalf("only %d of %d items completed; stats %+v", len(completed), items, d.Stats())
	}
	cancel()
	wg.Wait()

	mu.Lock()
	defer mu.Unlock()
	assert.Empty(t, errs)
	require.Len(t, completed, items)
	for id, n := range completed {
		assert.Equal(t, 1, n, "%s completed once", id)
	}
	require.NoError(t, worker.CheckInvariants(d))
	for _, w := range d.Workers() {
		assert.Equal(t, worker.Idle, w.State, "%s", w.ID)
		assert.Empty(t, w.Item)
	}
	s := d.Stats()
	assert.Equal(t, uint64(items), s.Completed)
	assert.Zero(t, d.Queued())
	t.Logf("stats: %+v", s)
}
