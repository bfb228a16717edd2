package groupcommit_test

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/groupcommit"
	"github.com/agentforeman/foreman/internal/stress"
)

// fate is when a stress request's context is cancelled.
type fate int

const (
	fateNone     fate = iota
	fateBefore        // before Submit: never queued
	fateRace          // by a goroutine started with Submit: anywhere
	fateQueued        // by the next Commit to start that does not carry it: queued, taken, or in another batch
	fateInCommit      // by the Commit that carries it, once that started: must be told the commit's verdict
	fateCount
)

// call is one Submit of the stress test.
type call struct {
	id     int
	weight int
	fate   fate
	ctx    context.Context
	cancel context.CancelFunc
	// leaderCancelled is set when a Commit this call led cancelled its
	// context (then a later batch may drop its own request).
	leaderCancelled atomic.Bool
	// returned is set once Submit has returned or panicked: no Commit may
	// see the request after that.
	returned atomic.Bool

	value    int
	err      error
	panicked bool
}

type callKey struct{}

// injectedError is a failure the stress Commit makes up.
type injectedError struct {
	batch bool // the whole batch failed; else this request only
	id    int
}

func (e *injectedError) Error() string {
	return fmt.Sprintf("injected failure (batch %v, id %d)", e.batch, e.id)
}

// stressLedger is the fake database: what was committed, and every broken
// rule the Commit saw.
type stressLedger struct {
	cfg groupcommit.Config[*call, int]

	mu        sync.Mutex
	rng       *rand.Rand
	committed map[int]int
	pending   map[int]*call // fateQueued calls not cancelled yet
	problems  []string
	commits   int
	largest   int
	panics    int

	inflight atomic.Int32
}

func (l *stressLedger) problem(format string, args ...any) {
	l.problems = append(l.problems, fmt.Sprintf(format, args...))
}

func (l *stressLedger) commit(ctx context.Context, batch []*call) []groupcommit.Result[int] {
	if n := l.inflight.Add(1); int(n) > l.cfg.Leaders {
		l.mu.Lock()
		l.problem("%d commits in flight, Leaders is %d", n, l.cfg.Leaders)
		l.mu.Unlock()
	}
	defer l.inflight.Add(-1)
	l.mu.Lock()
	l.commits++
	l.largest = max(l.largest, len(batch))
	if len(batch) == 0 {
		l.problem("an empty batch")
	}
	if l.cfg.MaxBatch > 0 && len(batch) > l.cfg.MaxBatch {
		l.problem("batch of %d, MaxBatch %d", len(batch), l.cfg.MaxBatch)
	}
	weight := 0
	carried := map[int]bool{}
	for _, c := range batch {
		weight += c.weight
		carried[c.id] = true
		if c.fate == fateBefore {
			l.problem("request %d reached a commit though cancelled before Submit", c.id)
		}
		if c.returned.Load() {
			l.problem("request %d reached a commit after its Submit returned", c.id)
		}
	}
	if l.cfg.MaxWeight > 0 && len(batch) > 1 && weight > l.cfg.MaxWeight {
		l.problem("batch weighs %d, MaxWeight %d", weight, l.cfg.MaxWeight)
	}
	// Cancel at every point: callers queued behind this batch (or in
	// another), callers of this batch while it commits, this batch's
	// leader.
	for id, c := range l.pending {
		if !carried[id] {
			c.cancel()
			delete(l.pending, id)
		}
	}
	for _, c := range batch {
		if c.fate == fateInCommit {
			c.cancel()
		}
	}
	if leader, _ := ctx.Value(callKey{}).(*call); leader != nil && l.rng.IntN(5) == 0 {
		leader.leaderCancelled.Store(true)
		leader.cancel()
	}
	if err := ctx.Err(); err != nil {
		l.problem("the commit's context ended: %v", err)
	}
	roll := l.rng.IntN(100)
	perRequest := make([]int, len(batch))
	for i := range perRequest {
		perRequest[i] = l.rng.IntN(10)
	}
	l.mu.Unlock()

	for range roll % 4 { // let others queue meanwhile, without sleeping
		runtime.Gosched()
	}
	l.mu.Lock()
	for _, c := range batch {
		if c.returned.Load() {
			l.problem("request %d: its Submit returned while its batch committed", c.id)
		}
	}
	l.mu.Unlock()
	out := make([]groupcommit.Result[int], len(batch))
	switch {
	case roll < 1:
		l.mu.Lock()
		l.panics++
		l.mu.Unlock()
		panic("injected panic")
	case roll < 6: // nothing written
		for i, c := range batch {
			out[i].Err = &injectedError{batch: true, id: c.id}
		}
		return out
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, c := range batch {
		if perRequest[i] == 0 { // this request refused, the others written
			out[i].Err = &injectedError{id: c.id}
			continue
		}
		l.committed[c.id]++
		if l.committed[c.id] > 1 {
			l.problem("request %d committed %d times", c.id, l.committed[c.id])
		}
		out[i].Value = c.id
	}
	return out
}

// TestStress runs many callers through queues of every shape, cancelling
// their contexts at every point and failing commits at random, and checks
// that every request was either committed exactly once and its caller told
// so, or not committed and its caller told why; that no goroutine is left
// behind; and that the queue ends empty with every slot given back.
func TestStress(t *testing.T) {
	rounds := stress.Size(32, 128)
	callers, each := stress.Size(32, 64), stress.Size(50, 80)
	for round := range rounds {
		seed := uint64(round)
		rng := rand.New(rand.NewPCG(seed, 0x9e3779b97f4a7c15))
		cfg := groupcommit.Config[*call, int]{Leaders: 1 + rng.IntN(3), MaxBatch: rng.IntN(6)}
		if rng.IntN(2) == 0 {
			cfg.Weight = func(c *call) int { return c.weight }
			cfg.MaxWeight = 1 + rng.IntN(20)
		}
		t.Run(fmt.Sprintf("seed=%d/leaders=%d/max-batch=%d/max-weight=%d", seed, cfg.Leaders, cfg.MaxBatch, cfg.MaxWeight), func(t *testing.T) {
			stressRound(t, cfg, rng, callers, each)
		})
	}
}

func stressRound(t *testing.T, cfg groupcommit.Config[*call, int], rng *rand.Rand, callers, each int) {
	goroutines := runtime.NumGoroutine()
	ledger := &stressLedger{cfg: cfg, rng: rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64())),
		committed: map[int]int{}, pending: map[int]*call{}}
	cfg.Commit = ledger.commit
	q, err := groupcommit.New(cfg)
	require.NoError(t, err)

	calls := make([][]*call, callers)
	var wg sync.WaitGroup
	for g := range callers {
		seed1, seed2 := rng.Uint64(), rng.Uint64()
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(seed1, seed2))
			for i := range each {
				c := &call{id: g*each + i, weight: 1 + rng.IntN(8), fate: fate(rng.IntN(int(fateCount)))}
				ctx, cancel := context.WithCancel(context.WithValue(t.Context(), callKey{}, c))
				c.ctx, c.cancel = ctx, cancel
				switch c.fate {
				case fateBefore:
					cancel()
				case fateRace:
					yields := rng.IntN(3)
					wg.Go(func() {
						for range yields {
							runtime.Gosched()
						}
						cancel()
					})
				case fateQueued:
					ledger.mu.Lock()
					ledger.pending[c.id] = c
					ledger.mu.Unlock()
				}
				func() {
					defer func() {
						c.returned.Store(true)
						if r := recover(); r != nil {
							c.panicked = true
						}
					}()
					c.value, c.err = q.Submit(ctx, c)
				}()
				calls[g] = append(calls[g], c)
			}
		})
	}
	waitOrDump(t, &wg)
	for _, c := range ledger.pending { // the last few, never cancelled
		c.cancel()
	}

	ledger.mu.Lock()
	defer ledger.mu.Unlock()
	for _, p := range ledger.problems {
		t.Error(p)
	}
	tally := map[string]int{}
	for _, cs := range calls {
		for _, c := range cs {
			tally[checkCall(t, c, ledger.committed[c.id])]++
			c.cancel()
		}
	}
	assert.Equal(t, 0, q.Queued(), "requests left in the queue")
	assert.Equal(t, 0, q.Leading(), "leader slots not given back")
	checkNoGoroutineLeak(t, goroutines)
	t.Logf("%d commits (largest batch %d, %d panicked): %v", ledger.commits, ledger.largest, ledger.panics, tally)
}

// checkCall checks one caller's answer against the ledger and says which
// kind of answer it was.
func checkCall(t *testing.T, c *call, committed int) string {
	t.Helper()
	var injected *injectedError
	switch {
	case committed > 1:
		t.Errorf("request %d committed %d times", c.id, committed)
		return "bad"
	case c.panicked:
		// Its caller led a batch whose Commit panicked: the panic is the
		// answer. Its own request was in that batch (not written), or
		// withdrawn, or in another batch, done before the panic left
		// Submit (Commit checks that none comes later).
		return "panicked"
	case c.err == nil:
		if committed != 1 || c.value != c.id {
			t.Errorf("request %d: told committed (value %d), committed %d times", c.id, c.value, committed)
		}
		return "committed"
	case committed != 0:
		t.Errorf("request %d: committed, yet told %v", c.id, c.err)
		return "bad"
	case errors.Is(c.err, context.Canceled):
		if c.ctx.Err() == nil {
			t.Errorf("request %d: told cancelled, yet its context is live", c.id)
		}
		if c.fate == fateInCommit && !c.leaderCancelled.Load() {
			t.Errorf("request %d: cancelled only while its batch committed, yet told %v instead of the verdict", c.id, c.err)
		}
		return "cancelled"
	case c.fate == fateBefore:
		t.Errorf("request %d: cancelled before Submit, yet told %v", c.id, c.err)
		return "bad"
	case errors.As(c.err, &injected):
		if injected.id != c.id {
			t.Errorf("request %d: told another request's failure: %v", c.id, c.err)
		}
		if injected.batch {
			return "batch failed"
		}
		return "refused"
	case errors.Is(c.err, groupcommit.ErrCommitPanicked):
		return "commit panicked"
	default:
		t.Errorf("request %d: unexpected error %v", c.id, c.err)
		return "bad"
	}
}

// waitOrDump waits for wg, or fails the test with every goroutine's stack
// when the callers seem stuck: a stalled queue shows at once, with where.
func waitOrDump(t *testing.T, wg *sync.WaitGroup) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		buf := make([]byte, 1<<20)
		t.Fatalf("the callers are stuck:\n%s", buf[:runtime.Stack(buf, true)])
	}
}

// checkNoGoroutineLeak waits (spinning, not sleeping) for the goroutines
// of a round to exit; the queue starts none, so the count must come back
// to what it was. A goroutine that lingers fails the test with every stack.
func checkNoGoroutineLeak(t *testing.T, before int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > before {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before the round:\n%s", runtime.NumGoroutine(), before, buf[:runtime.Stack(buf, true)])
		}
		runtime.Gosched()
	}
}
