package worker_test

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// stress runs items through a Dispatcher built from cfg until every item
// completed or was parked, with a reviewer answering every review request
// and then replaying stale messages about the reviewed assignment, and an
// invariant checker examining the pool after every burst of events while
// the work runs. It checks, from the ordered event stream, that no item is
// assigned twice at once, and at the end that every item finished exactly
// once and no worker is left busy.
type stress struct {
	t     *testing.T
	items int

	mu        sync.Mutex
	holder    map[foreman.ItemID]foreman.AssignmentID
	completed map[foreman.ItemID]int
	parked    map[foreman.ItemID]int
	errs      []string
	allDone   chan struct{}
	reviews   chan worker.Event
	changed   chan struct{} // capacity 1: events arrived since the last check

	// Written by the reviewer and checker goroutines, read after they end.
	replays []replay
	checks  int
	invErr  error
}

// replay is what the Dispatcher answered to a message or verdict about an
// assignment after its review, and what it should have answered.
type replay struct {
	what      string
	got, want worker.Disposition
	err       error
}

func newStress(t *testing.T, items int) *stress {
	return &stress{t: t, items: items,
		holder: map[foreman.ItemID]foreman.AssignmentID{}, completed: map[foreman.ItemID]int{},
		parked: map[foreman.ItemID]int{}, allDone: make(chan struct{}),
		reviews: make(chan worker.Event, items*4), changed: make(chan struct{}, 1)}
}

func (s *stress) hook(e worker.Event) {
	s.mu.Lock()
	switch e.Kind {
	case worker.EventAssigned:
		if cur, ok := s.holder[e.Item]; ok {
			s.errs = append(s.errs, fmt.Sprintf("%s assigned as %s while %s holds it", e.Item, e.Assignment, cur))
		}
		s.holder[e.Item] = e.Assignment
	case worker.EventRequeued, worker.EventReviewRejected:
		delete(s.holder, e.Item)
	case worker.EventParked:
		delete(s.holder, e.Item)
		s.parked[e.Item]++
		s.finished()
	case worker.EventCompleted:
		delete(s.holder, e.Item)
		s.completed[e.Item]++
		s.finished()
	case worker.EventReviewRequested:
		s.reviews <- e
	}
	s.mu.Unlock()
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// finished closes allDone once every item completed or was parked. Called
// with s.mu held.
func (s *stress) finished() {
	if len(s.completed)+len(s.parked) == s.items {
		close(s.allDone)
	}
}

// reviewer rejects every first attempt and approves every later one. After
// each verdict it replays what a confused transport or reviewer might send
// about the reviewed assignment: the READY_FOR_REVIEW that ended it (a
// Duplicate), a DONE it never sent (Stale) and the verdict again (Stale).
func (s *stress) reviewer(ctx context.Context, d *worker.Dispatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case e := <-s.reviews:
			// Background, not ctx: the last approval ends the run and
			// cancels ctx, and its replays must still be answered.
			bg := context.Background()
			v := worker.Verdict{Worker: e.Worker, Assignment: e.Assignment, Approved: e.Attempt > 1, Feedback: "again"}
			disp, err := d.Review(bg, v)
			s.replays = append(s.replays, replay{"verdict", disp, worker.Applied, err})
			disp, err = d.Deliver(bg, worker.Message{Kind: worker.MsgReadyForReview, Worker: e.Worker, Assignment: e.Assignment})
			s.replays = append(s.replays, replay{"READY_FOR_REVIEW again", disp, worker.Duplicate, err})
			disp, err = d.Deliver(bg, worker.Message{Kind: worker.MsgDone, Worker: e.Worker, Assignment: e.Assignment})
			s.replays = append(s.replays, replay{"DONE after the verdict", disp, worker.Stale, err})
			disp, err = d.Review(bg, v)
			s.replays = append(s.replays, replay{"verdict again", disp, worker.Stale, err})
		}
	}
}

// checker checks the pool's invariants whenever events have arrived: no
// item held by two workers, no busy worker without an item, no item lost.
func (s *stress) checker(ctx context.Context, d *worker.Dispatcher) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.changed:
			s.checks++
			if err := worker.CheckInvariants(d); err != nil && s.invErr == nil {
				s.invErr = fmt.Errorf("after %d checks: %w", s.checks, err)
			}
		}
	}
}

// run submits items from several goroutines and waits for all of them.
func (s *stress) run(cfg worker.Config, items []worker.Item) *worker.Dispatcher {
	t := s.t
	cfg.OnEvent = s.hook
	d, err := worker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { s.reviewer(ctx, d) })
	wg.Go(func() { s.checker(ctx, d) })

	var submit sync.WaitGroup
	for g := range 5 {
		submit.Go(func() {
			for i := g; i < len(items); i += 5 {
				assert.NoError(t, d.Submit(context.Background(), items[i]))
			}
		})
	}
	submit.Wait()
	select {
	case <-s.allDone:
	case <-time.After(60 * time.Second): // a hang guard, not a timing assertion
		s.mu.Lock()
		t.Errorf("only %d completed and %d parked of %d items; stats %+v", len(s.completed), len(s.parked), len(items), d.Stats())
		s.mu.Unlock()
	}
	cancel()
	wg.Wait()

	require.NoError(t, s.invErr, "invariants while running")
	assert.Positive(t, s.checks, "the invariants were checked while the work ran")
	for _, r := range s.replays {
		require.NoError(t, r.err, r.what)
		assert.Equal(t, r.want, r.got, r.what)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	assert.Empty(t, s.errs)
	for id, n := range s.completed {
		assert.Equal(t, 1, n, "%s completed once", id)
		assert.Zero(t, s.parked[id], "%s completed and parked", id)
	}
	for id, n := range s.parked {
		assert.Equal(t, 1, n, "%s parked once", id)
	}
	require.NoError(t, worker.CheckInvariants(d))
	for _, w := range d.Workers() {
		assert.Equal(t, worker.Idle, w.State, "%s", w.ID)
		assert.Empty(t, w.Item)
	}
	assert.Zero(t, d.Queued())
	st := d.Stats()
	assert.Equal(t, uint64(len(s.completed)), st.Completed)
	assert.Equal(t, uint64(len(s.replays)/4), st.Duplicate, "one duplicate per review")
	t.Logf("%d invariant checks while running; stats: %+v", s.checks, st)
	return d
}

// Test50Workers500Items runs 500 items through 50 pooled workers with an
// in-process agent that succeeds, fails (requeue) or asks for review.
func Test50Workers500Items(t *testing.T) {
	const workers, items = 50, 500
	var rngMu sync.Mutex
	rng := rand.New(rand.NewPCG(1, 2))
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		on(phases.StreamEvent{Line: "working"})
		rngMu.Lock()
		fail := rng.IntN(10) == 0 && req.Iteration < 3
		rngMu.Unlock()
		return phases.AgentResult{Success: !fail, ExitCode: map[bool]int{true: 1}[fail]}, nil
	})
	var its []worker.Item
	for i := range items {
		its = append(its, worker.Item{ID: foreman.ItemID(fmt.Sprintf("item-%03d", i)), Priority: i % 3, RequireReview: i%7 == 0})
	}
	s := newStress(t, items)
	s.run(worker.Config{MaxWorkers: workers, Agent: agent, Commits: worker.NoCommits, CrashBudget: 5}, its)
	assert.Len(t, s.completed, items)
}

// TestStressSubprocessAgents runs 60 items through 8 pooled workers whose
// agents are real processes (sh through agentcmd, in each item's own
// directory): most exit 0, some exit 3 once and are retried, a few always
// exit 3 and are parked with CRASH_LIMIT, some ask for review.
func TestStressSubprocessAgents(t *testing.T) {
	const workers, items = 8, 60
	script := `case "$FOREMAN_WORKSPACE" in
*-flaky) [ "$FOREMAN_ITERATION" = 1 ] && exit 3 ;;
*-broken) exit 3 ;;
esac
exit 0`
	root := t.TempDir()
	var its []worker.Item
	broken := 0
	for i := range items {
		name := fmt.Sprintf("item-%02d", i)
		switch {
		case i%13 == 2:
			name += "-broken"
			broken++
		case i%5 == 1:
			name += "-flaky"
		}
		dir := filepath.Join(root, name)
		require.NoError(t, os.Mkdir(dir, 0o755))
		its = append(its, worker.Item{ID: foreman.ItemID(name), Prompt: "p", Worktree: dir, RequireReview: i%7 == 0})
	}
	var escalated sync.Map
	esc := worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error {
		escalated.Store(e.Item, e.Kind)
		return nil
	})
	s := newStress(t, items)
	agent := agentcmd.New(agentcmd.Config{Argv: []string{"sh", "-c", script}, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
	d := s.run(worker.Config{MaxWorkers: workers, Agent: agent, Commits: worker.NoCommits, Escalator: esc}, its)
	assert.Len(t, s.parked, broken)
	assert.Len(t, s.completed, items-broken)
	for id := range s.parked {
		k, _ := escalated.Load(id)
		assert.Equal(t, worker.CrashLimit, k, "%s", id)
	}
	require.NoError(t, d.Close())
}
