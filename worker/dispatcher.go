package worker

import (
	"context"
	cryptorand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"sort"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/hashicorp/go-multierror"
)

// Dispatcher decides who works on what and watches them: it keeps the pool
// and the ready queue (the deterministic core), fences every message by its
// assignment id, watches liveness and progress through health.Deadlines,
// escalates, and drives workers through a Transport. It is safe for
// concurrent use.
type Dispatcher struct {
	cfg       Config
	transport Transport
	runtime   *Runtime
	deadlines *health.Deadlines
	// probes times out the probes of suspicious workers: a second
	// Deadlines whose liveness timeout is ProbeTimeout and whose other
	// deadlines are off, so all probes share one clock timer.
	probes *health.Deadlines

	// base is the context effects run with: not the caller's, since an
	// effect queued by one call may be carried out during another.
	base       context.Context
	cancelBase context.CancelFunc

	mu       sync.Mutex
	core     *core
	pending  []effect
	spare    []effect
	draining bool
	idle     chan struct{} // closed once stopping and nothing is assigned
	idleSent bool

	// evidence gathers evidence of work before a stalled worker is killed
	// (nil: none). retries holds the backoff timers of rate-limited items.
	evidence WorkEvidence
	retries  map[foreman.ItemID]retryTimer

	stopOnce sync.Once
	stopErr  error
}

// New returns a running Dispatcher: in pooled mode its MaxWorkers workers
// exist and wait for work. Shutdown or Close it to stop everything it started.
func New(cfg Config) (*Dispatcher, error) {
	cfg = cfg.withDefaults()
	if cfg.Transport == nil && cfg.Agent == nil {
		return nil, ErrNoTransport
	}
	d := &Dispatcher{cfg: cfg, idle: make(chan struct{}), retries: map[foreman.ItemID]retryTimer{}}
	d.base, d.cancelBase = context.WithCancel(context.Background())
	d.evidence = cfg.Evidence
	if d.evidence == nil {
		d.evidence, _ = cfg.Transport.(WorkEvidence)
	}
	var seed [16]byte
	_, _ = cryptorand.Read(seed[:])
	rng := rand.New(rand.NewPCG(binary.LittleEndian.Uint64(seed[:8]), binary.LittleEndian.Uint64(seed[8:])))
	d.core = newCore(coreConfig{
		rateLimitBackoff: cfg.RateLimitBackoff, rateLimitMaxBackoff: cfg.RateLimitMaxBackoff,
		rateLimitJitter: cfg.RateLimitJitter, jitter: rng.Int64N,
		slowExtensions: cfg.SlowWorkerExtensions, slowExtension: cfg.SlowWorkerExtension, slowMinCPU: cfg.SlowWorkerMinCPU,
		mode: cfg.Mode, maxWorkers: cfg.MaxWorkers, maxReviewRejections: cfg.MaxReviewRejections,
		crashBudget: cfg.CrashBudget, stallBudget: cfg.StallBudget,
		itemBudget: cfg.ItemBudget, totalBudget: cfg.TotalBudget,
		assignmentPrefix: cfg.AssignmentPrefix, workerPrefix: cfg.WorkerPrefix,
		rememberFinished: cfg.RememberFinished, hooked: cfg.OnEvent != nil, checksItems: cfg.ItemChecker != nil,
	}, health.NewStuckQG(health.StuckQGConfig{Identical: cfg.StuckQGIdentical, Window: cfg.StuckQGWindow}))
	d.transport = cfg.Transport
	if d.transport == nil {
		d.runtime = NewRuntime(RuntimeConfig{
			Agent: cfg.Agent, Commits: cfg.Commits, HeartbeatInterval: cfg.HeartbeatInterval,
			AgentTimeout: cfg.AgentTimeout, Gate: cfg.Gate, Clock: cfg.Clock, Logger: cfg.Logger, OnEvent: d.external,
		}, d)
		d.transport = d.runtime
		if d.evidence == nil {
			d.evidence = d.runtime
		}
	}
	d.core.cfg.gathersEvidence = d.evidence != nil
	d.deadlines = health.NewDeadlines(health.DeadlineConfig{
		Clock: cfg.Clock, HeartbeatInterval: cfg.HeartbeatInterval,
		LivenessTimeout: cfg.LivenessTimeout, ProgressTimeout: cfg.ProgressTimeout,
		AttemptTimeout: cfg.AttemptTimeout, OnExpiry: d.onExpiry, Logger: cfg.Logger,
	})
	d.probes = health.NewDeadlines(health.DeadlineConfig{
		Clock: cfg.Clock, LivenessTimeout: cfg.ProbeTimeout, ProgressTimeout: -1,
		OnExpiry: d.onProbeExpiry, Logger: cfg.Logger,
	})
	if cfg.Mode == ModePooled {
		d.mu.Lock()
		for range cfg.MaxWorkers {
			if err := d.core.addWorker(d.core.nextWorkerID(), cfg.Clock.Now()); err != nil {
				d.mu.Unlock()
				return nil, err
			}
		}
		d.unlockAndDrain()
	}
	return d, nil
}

// Config returns the configuration in effect, defaults filled in.
func (d *Dispatcher) Config() Config { return d.cfg }

// Submit queues ready work. An item already queued, assigned or in review is
// ErrItemActive; a parked item is submitted afresh, its counters reset.
func (d *Dispatcher) Submit(ctx context.Context, it Item) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	err := d.core.submit(it, d.cfg.Clock.Now())
	d.unlockAndDrain()
	return err
}

// AddWorker adds a pooled worker under id, for example to replace one that
// was lost; the pool never exceeds MaxWorkers (ErrPoolFull).
func (d *Dispatcher) AddWorker(ctx context.Context, id foreman.WorkerID) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if d.cfg.Mode != ModePooled {
		return fmt.Errorf("worker: AddWorker in %s mode", d.cfg.Mode)
	}
	d.mu.Lock()
	err := d.core.addWorker(id, d.cfg.Clock.Now())
	d.unlockAndDrain()
	return err
}

// Deliver applies a worker's message. Only a message carrying the worker's
// current assignment id is applied; anything else is Stale or Duplicate,
// logged through OnEvent, counted and ignored. A malformed message, or one
// the worker's state does not allow, is Invalid with an error saying why
// (ErrInvalidMessage, or a *TransitionError). The effects of the message
// (commands, escalations, events) have been carried out when Deliver
// returns, unless another call was already carrying effects out, in which
// case that call carries them out too, in order.
func (d *Dispatcher) Deliver(ctx context.Context, m Message) (Disposition, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d.mu.Lock()
	disp, err := d.core.deliver(m, d.cfg.Clock.Now())
	d.unlockAndDrain()
	return disp, err
}

// Review applies a reviewer's verdict to an assignment that is ready for
// review, fenced like a message. Approval completes the item. A rejection
// reassigns it with every reviewer's feedback in MemoryContext and the next
// Attempt (pooled: to the same worker; fresh: to a new worker), until more
// than MaxReviewRejections rejections escalate REVIEW_LIMIT, park the item
// and free the worker.
func (d *Dispatcher) Review(ctx context.Context, v Verdict) (Disposition, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	d.mu.Lock()
	disp, err := d.core.review(v, d.cfg.Clock.Now())
	d.unlockAndDrain()
	return disp, err
}

// Stats returns the counters.
func (d *Dispatcher) Stats() Stats {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := d.core.stats
	s.Usage, s.Halted = d.core.total, d.core.halted
	return s
}

// WorkerInfo is a snapshot of one worker.
type WorkerInfo struct {
	ID         foreman.WorkerID
	State      WorkerState
	Assignment foreman.AssignmentID
	Item       foreman.ItemID
	Worktree   string
	// PendingQGOutput is the last quality-gate output of the current
	// assignment; cleared on every new assignment.
	PendingQGOutput string
	LastCommit      string
	LastSeen        time.Time
	LastProgress    time.Time
	LastOutput      time.Time
}

func (w *workerSlot) info() WorkerInfo {
	i := WorkerInfo{ID: w.id, State: w.state, Assignment: w.assignment, Worktree: w.worktree,
		PendingQGOutput: w.pendingQG, LastCommit: w.lastCommit, LastSeen: w.lastSeen,
		LastProgress: w.progressAt, LastOutput: w.lastOutput}
	if w.item != nil {
		i.Item = w.item.item.ID
	}
	return i
}

// Workers returns a snapshot of every worker, sorted by id.
func (d *Dispatcher) Workers() []WorkerInfo {
	d.mu.Lock()
	out := make([]WorkerInfo, 0, len(d.core.workers))
	for _, w := range d.core.workers {
		out = append(out, w.info())
	}
	d.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out
}

// Worker returns a snapshot of one worker.
func (d *Dispatcher) Worker(id foreman.WorkerID) (WorkerInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if w, ok := d.core.workers[id]; ok {
		return w.info(), true
	}
	return WorkerInfo{}, false
}

// ItemInfo is a snapshot of one item the Dispatcher holds. Completed items
// are forgotten (their completion went to OnEvent).
type ItemInfo struct {
	Item       Item
	State      ItemState
	Worker     foreman.WorkerID
	Attempt    int
	Rejections int
	Crashes    int
	Stalls     int
	Feedback   []string
	Usage      Usage
}

// Item returns a snapshot of an item that is queued, assigned, in review or
// parked.
func (d *Dispatcher) Item(id foreman.ItemID) (ItemInfo, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	r, ok := d.core.items[id]
	if !ok {
		return ItemInfo{}, false
	}
	i := ItemInfo{Item: r.item, State: r.state, Attempt: r.attempt, Rejections: r.rejections,
		Crashes: r.crashes, Stalls: r.stalls, Feedback: append([]string(nil), r.feedback...), Usage: r.usage}
	if r.worker != nil {
		i.Worker = r.worker.id
	}
	return i, true
}

// RateLimited reports how many items are backing off after their agent was
// rate-limited, and when the last of them is queued again. A host that
// sees it non-zero may lower concurrency with SetMaxActive.
func (d *Dispatcher) RateLimited() RateLimitStatus {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.rateLimitStatus()
}

// SetMaxActive bounds how many assignments run at once, below MaxWorkers,
// for example while a provider's rate limits persist; n <= 0 or n >=
// MaxWorkers lifts the bound. Running assignments are not stopped: the
// bound holds back new ones.
func (d *Dispatcher) SetMaxActive(ctx context.Context, n int) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	d.mu.Lock()
	if n >= d.cfg.MaxWorkers {
		n = 0
	}
	d.core.maxActive = max(n, 0)
	d.core.tryAssign(d.cfg.Clock.Now())
	d.unlockAndDrain()
	return nil
}

// Queued reports how many items wait for a worker.
func (d *Dispatcher) Queued() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.core.queue.Len()
}

// Shutdown stops the Dispatcher gracefully: it stops assigning, waits up to
// ShutdownTimeout (or until ctx ends) for running assignments to finish,
// then kills what still runs (its items go back to Queued, never lost),
// tells every worker to stop and waits up to KillTimeout for them. The
// error lists, as a *multierror.Error of *StopError, every worker that did
// not stop. Shutdown and Close are safe to call more than once; later calls
// return the first result.
func (d *Dispatcher) Shutdown(ctx context.Context) error {
	d.stopOnce.Do(func() { d.stopErr = d.shutdown(ctx, d.cfg.ShutdownTimeout) })
	return d.stopErr
}

// Close is Shutdown without the soft wait: running assignments are killed
// at once.
func (d *Dispatcher) Close() error {
	d.stopOnce.Do(func() { d.stopErr = d.shutdown(context.Background(), 0) })
	return d.stopErr
}

func (d *Dispatcher) shutdown(ctx context.Context, soft time.Duration) error {
	clk := d.cfg.Clock
	d.mu.Lock()
	d.core.stopping = true
	d.core.emit(Event{Kind: EventShutdown, At: clk.Now(), Reason: "stop assigning"})
	d.unlockAndDrain()
	if soft > 0 {
		t := clk.NewTimer(soft)
		select {
		case <-d.idle:
		case <-t.C():
		case <-ctx.Done():
		}
		t.Stop()
	}
	d.mu.Lock()
	d.core.shutdownActive(clk.Now())
	for id, t := range d.retries {
		t.timer.Stop() // a rate-limited item stays RateLimited: never lost, not retried
		delete(d.retries, id)
	}
	d.unlockAndDrain()

	var errs *multierror.Error
	if cl, ok := d.transport.(Closer); ok {
		cctx, cancel := context.WithCancel(ctx)
		t := clk.AfterFunc(d.cfg.KillTimeout, cancel)
		if err := cl.Close(cctx); err != nil {
			errs = multierror.Append(errs, err)
		}
		t.Stop()
		cancel()
	}
	_ = d.deadlines.Close()
	_ = d.probes.Close()
	d.cancelBase()
	return errs.ErrorOrNil()
}

// StopError names a worker that did not stop at shutdown.
type StopError struct {
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Err        error
}

func (e *StopError) Error() string {
	return fmt.Sprintf("worker %s (assignment %s) did not stop: %v", e.Worker, e.Assignment, e.Err)
}

func (e *StopError) Unwrap() error { return e.Err }
