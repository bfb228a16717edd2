package worker

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/mutant"
)

// The core is the Dispatcher's deterministic part: the pool, the queue and
// every decision about them. It does no I/O, reads no clock (time arrives as
// an argument) and is not safe for concurrent use; the Dispatcher holds its
// lock around every call and carries out the effects it leaves in out.

type coreConfig struct {
	mode                Mode
	maxWorkers          int
	maxReviewRejections int
	crashBudget         int
	stallBudget         int
	itemBudget          Budget
	totalBudget         Budget
	assignmentPrefix    string
	workerPrefix        string
	rememberFinished    int
	hooked              bool
	checksItems         bool // Config.ItemChecker is set
	rateLimitBackoff    time.Duration
	rateLimitMaxBackoff time.Duration
	rateLimitJitter     time.Duration
	// jitter yields a random int64 in [0, n); the core's only randomness,
	// injected so that it stays deterministic under test.
	jitter          func(n int64) int64
	slowExtensions  int
	slowExtension   time.Duration
	slowMinCPU      time.Duration
	gathersEvidence bool // an evidence source exists
}

type effectKind uint8

const (
	effTrack          effectKind = iota + 1 // start the assignment's deadlines
	effUntrack                              // stop them
	effHeartbeat                            // move liveness
	effProgress                             // move progress (and liveness)
	effSend                                 // send cmd through the transport
	effEscalate                             // hand esc to the Escalator
	effEvent                                // report ev through the hook
	effArmProbe                             // start the probe timeout of assignment
	effCancelProbe                          // stop it
	effCheckItem                            // ask Config.ItemChecker whether item is open
	effRetryAfter                           // queue item again after delay (token fences it)
	effGatherEvidence                       // ask for evidence of work of assignment since its last progress
	effExtendProgress                       // move assignment's progress deadline delay from now
)

// effApplied marks an effect absorb applied: nothing is left to carry out.
const effApplied effectKind = 0

type effect struct {
	kind       effectKind
	assignment foreman.AssignmentID
	item       foreman.ItemID
	cmd        Command
	esc        *Escalation
	ev         Event
	delay      time.Duration
	token      uint64
	worker     foreman.WorkerID
	since      time.Time
}

type workerSlot struct {
	id         foreman.WorkerID
	state      WorkerState
	assignment foreman.AssignmentID
	item       *itemRec
	worktree   string
	pendingQG  string
	lastCommit string
	sawRunning bool
	final      MessageKind // the completion message that ended the assignment
	lastSeen   time.Time
	lastOutput time.Time
	progressAt time.Time
	inIdle     bool
	// hp is the assignment's place in health's crash-detection protocol
	// (Working, Suspicious, Probing).
	hp health.State
	// extensions counts the slow-worker extensions of the assignment;
	// gathering is set while evidence of its work is being gathered.
	extensions int
	gathering  bool
}

type itemRec struct {
	item       Item
	state      ItemState
	seq        uint64
	qIndex     int
	attempt    int
	rejections int
	feedback   []string
	crashes    int
	stalls     int
	usage      Usage
	overBudget bool
	worker     *workerSlot
	// While Recovering: the protocol state after the confirmed crash, and
	// the crashed assignment, which the item check's answer must name.
	recovery health.State
	checking foreman.AssignmentID
	// rateLimits counts the item's rate-limited attempts in a row (for
	// the backoff); retryToken fences its retry timer; retryAt is when
	// it is queued again.
	rateLimits int
	retryToken uint64
	retryAt    time.Time
}

// finishedRing remembers how recent assignments ended: which worker held
// them and which completion message (if any) ended them, so that a repeat
// of that message is a Duplicate and anything else about them is Stale.
type finishedRing struct {
	by   map[foreman.AssignmentID]finishedAs
	ring []foreman.AssignmentID
	next int
}

type finishedAs struct {
	worker foreman.WorkerID
	final  MessageKind
}

func (f *finishedRing) add(a foreman.AssignmentID, w foreman.WorkerID, final MessageKind) {
	if len(f.ring) == 0 {
		return
	}
	if old := f.ring[f.next]; old != "" {
		delete(f.by, old)
	}
	f.ring[f.next] = a
	f.by[a] = finishedAs{w, final}
	f.next = (f.next + 1) % len(f.ring)
}

type core struct {
	cfg          coreConfig
	workers      map[foreman.WorkerID]*workerSlot
	idle         []*workerSlot // FIFO from idleHead
	idleHead     int
	live         int
	items        map[foreman.ItemID]*itemRec
	queue        readyQueue
	byAssignment map[foreman.AssignmentID]*workerSlot
	finished     finishedRing
	stuckQG      *health.StuckQG
	seq          uint64
	assignSeq    uint64
	workerSeq    uint64
	stopping     bool
	halted       bool
	// maxActive bounds the assignments running at once (a host lowers it
	// while rate limits persist); 0 means MaxWorkers.
	maxActive   int
	rateLimited int // items now RateLimited
	retrySeq    uint64
	// resubmitted counts parked items submitted again: they are counted in
	// stats.Submitted twice but are one item (see checkInvariants).
	resubmitted uint64
	total       Usage
	stats       Stats
	out         []effect
}

func newCore(cfg coreConfig, stuck *health.StuckQG) *core {
	return &core{
		cfg:          cfg,
		workers:      make(map[foreman.WorkerID]*workerSlot),
		items:        make(map[foreman.ItemID]*itemRec),
		byAssignment: make(map[foreman.AssignmentID]*workerSlot),
		finished: finishedRing{
			by:   make(map[foreman.AssignmentID]finishedAs, cfg.rememberFinished),
			ring: make([]foreman.AssignmentID, cfg.rememberFinished),
		},
		stuckQG: stuck,
	}
}

func (c *core) emit(ev Event) {
	if c.cfg.hooked {
		// Grown by one and filled in place: an effect literal is built
		// whole and then copied, and an effect is large.
		c.out = append(c.out, effect{})
		e := &c.out[len(c.out)-1]
		e.kind, e.ev = effEvent, ev
	}
}

func (c *core) send(cmd Command) {
	c.out = append(c.out, effect{kind: effSend, cmd: cmd})
}

// move applies ev to w through the worker table. An invalid pair is a bug
// in the core, not in its input, so it panics rather than corrupt the pool.
func (c *core) move(w *workerSlot, ev WorkerEvent, now time.Time) {
	to, err := NextWorkerState(w.state, ev)
	if err != nil {
		panic(fmt.Sprintf("worker core: %v (worker %s)", err, w.id))
	}
	if to != w.state {
		c.emit(Event{Kind: EventWorkerState, At: now, Worker: w.id, Assignment: w.assignment, From: w.state, To: to})
	}
	w.state = to
	if to == Idle && !w.inIdle {
		w.inIdle = true
		c.idle = append(c.idle, w)
	}
}

func (c *core) moveItem(r *itemRec, ev ItemEvent) {
	to, err := NextItemState(r.state, ev)
	if err != nil {
		panic(fmt.Sprintf("worker core: %v (item %s)", err, r.item.ID))
	}
	r.state = to
}

func (c *core) addWorker(id foreman.WorkerID, now time.Time) error {
	if err := id.Validate(); err != nil {
		return err
	}
	if c.stopping {
		return ErrStopped
	}
	if _, ok := c.workers[id]; ok {
		return fmt.Errorf("%w: %s", ErrWorkerExists, id)
	}
	if c.live >= c.cfg.maxWorkers {
		return ErrPoolFull
	}
	w := &workerSlot{id: id, state: Idle, inIdle: true}
	c.workers[id] = w
	c.idle = append(c.idle, w)
	c.live++
	c.emit(Event{Kind: EventWorkerAdded, At: now, Worker: id})
	c.tryAssign(now)
	return nil
}

func (c *core) nextWorkerID() foreman.WorkerID {
	c.workerSeq++
	return foreman.WorkerID(c.cfg.workerPrefix + strconv.FormatUint(c.workerSeq, 10))
}

func (c *core) submit(it Item, now time.Time) error {
	if err := it.ID.Validate(); err != nil {
		return err
	}
	if c.stopping {
		return ErrStopped
	}
	if r, ok := c.items[it.ID]; ok {
		if r.state != Parked && !mutant.Active(mutant.SpawnTwice) {
			return fmt.Errorf("%w: %s is %s", ErrItemActive, it.ID, r.state)
		}
		delete(c.items, it.ID)
		c.stuckQG.Reset(string(it.ID))
		c.resubmitted++
	}
	c.seq++
	r := &itemRec{item: it, state: Queued, seq: c.seq, qIndex: -1}
	c.items[it.ID] = r
	c.queue.push(r)
	c.stats.Submitted++
	c.emit(Event{Kind: EventSubmitted, At: now, Item: it.ID})
	c.tryAssign(now)
	return nil
}

// tryAssign hands queued items to free workers, highest priority first,
// until the queue or the capacity runs out.
func (c *core) tryAssign(now time.Time) {
	for !c.stopping && !c.halted && c.queue.Len() > 0 {
		if c.maxActive > 0 && len(c.byAssignment) >= c.maxActive {
			return
		}
		var w *workerSlot
		if c.cfg.mode == ModePooled {
			if w = c.popIdle(); w == nil {
				return
			}
		} else if c.live >= c.cfg.maxWorkers {
			return
		}
		r := c.queue.pop()
		if r.overBudget || c.cfg.itemBudget.exceededBy(r.usage) {
			c.park(r, "over its budget", now)
			if w != nil {
				w.inIdle = true
				c.idle = append(c.idle, w)
			}
			continue
		}
		if w == nil {
			w = &workerSlot{id: c.nextWorkerID(), state: Idle}
			c.workers[w.id] = w
			c.live++
			c.emit(Event{Kind: EventWorkerAdded, At: now, Worker: w.id})
		}
		c.move(w, WorkerReserve, now)
		c.moveItem(r, ItemAssign)
		c.start(w, r, now)
	}
}

// popIdle takes the worker that has been idle longest (FIFO, so work
// spreads over the pool). Entries are removed lazily: a worker that left
// Idle since it was queued is skipped.
func (c *core) popIdle() *workerSlot {
	for c.idleHead < len(c.idle) {
		w := c.idle[c.idleHead]
		c.idle[c.idleHead] = nil
		c.idleHead++
		if c.idleHead > 1024 && c.idleHead*2 > len(c.idle) {
			n := copy(c.idle, c.idle[c.idleHead:])
			clear(c.idle[n:])
			c.idle, c.idleHead = c.idle[:n], 0
		}
		w.inIdle = false
		if w.state == Idle {
			return w
		}
	}
	c.idle, c.idleHead = c.idle[:0], 0
	return nil
}

// start issues a new assignment of r to w (Reserved), clearing everything
// the worker held for an earlier one.
func (c *core) start(w *workerSlot, r *itemRec, now time.Time) {
	c.assignSeq++
	id := foreman.AssignmentID(c.cfg.assignmentPrefix + strconv.FormatUint(c.assignSeq, 10))
	r.attempt++
	r.worker = w
	w.assignment = id
	w.item = r
	w.worktree = r.item.Worktree
	w.pendingQG = ""
	w.lastCommit = ""
	w.sawRunning = false
	w.lastSeen, w.progressAt, w.lastOutput = now, now, time.Time{}
	w.hp = health.State{Phase: health.Working, Crashes: r.crashes, Since: now}
	w.extensions, w.gathering = 0, false
	c.byAssignment[id] = w
	a := &Assignment{
		ID: id, Worker: w.id, Item: r.item.ID, Stage: r.item.Stage,
		Prompt: r.item.Prompt, Worktree: r.item.Worktree, Attempt: r.attempt,
		MemoryContext: memoryContext(r), RequireReview: r.item.RequireReview,
	}
	if n := len(r.feedback); n > 0 {
		a.Feedback = r.feedback[n-1]
	}
	c.stats.Assigned++
	c.out = append(c.out, effect{kind: effTrack, assignment: id})
	c.send(Command{Kind: CommandAssign, Worker: w.id, Assignment: id, Assign: a})
	c.emit(Event{Kind: EventAssigned, At: now, Worker: w.id, Assignment: id, Item: r.item.ID, Attempt: r.attempt})
}

// memoryContext is the item's own context followed by every reviewer's
// feedback so far, so a retry knows what was said before.
func memoryContext(r *itemRec) string {
	if len(r.feedback) == 0 {
		return r.item.MemoryContext
	}
	var b strings.Builder
	if r.item.MemoryContext != "" {
		b.WriteString(r.item.MemoryContext)
		b.WriteString("\n\n")
	}
	fmt.Fprintf(&b, "Reviewer feedback on earlier attempts (this is attempt %d):\n", r.attempt)
	for i, fb := range r.feedback {
		fmt.Fprintf(&b, "\n--- Rejection %d ---\n%s\n", i+1, strings.TrimSpace(fb))
	}
	return b.String()
}

func (c *core) escalate(kind EscalationKind, w *workerSlot, r *itemRec, reason string, requeued bool, now time.Time) *Escalation {
	e := &Escalation{
		Kind: kind, Reason: reason, Requeued: requeued,
		MaxReviewRejections: c.cfg.maxReviewRejections, CrashBudget: c.cfg.crashBudget,
		StallBudget: c.cfg.stallBudget, TotalUsage: c.total,
		SuggestedAction: suggestedAction(kind, requeued), At: now,
	}
	if w != nil {
		e.Worker, e.Assignment = w.id, w.assignment
	}
	if r != nil {
		e.Item, e.Stage, e.Attempt, e.Rejections = r.item.ID, r.item.Stage, r.attempt, r.rejections
		e.Crashes, e.Stalls, e.ItemUsage = r.crashes, r.stalls, r.usage
	}
	c.stats.Escalations++
	c.out = append(c.out, effect{kind: effEscalate, esc: e})
	c.emit(Event{Kind: EventEscalated, At: now, Worker: e.Worker, Assignment: e.Assignment, Item: e.Item, Attempt: e.Attempt, Reason: reason, Escalation: e})
	return e
}

// recordUsage adds u to r's and the dispatcher's totals and escalates the
// first time either goes over its budget. Work already running is not
// stopped: it may overshoot by what it spends before it next reports.
func (c *core) recordUsage(w *workerSlot, r *itemRec, u Usage, now time.Time) {
	if u == (Usage{}) {
		return
	}
	r.usage = r.usage.add(u)
	c.total = c.total.add(u)
	c.emit(Event{Kind: EventUsage, At: now, Worker: w.id, Assignment: w.assignment, Item: r.item.ID, Usage: u})
	if !r.overBudget && c.cfg.itemBudget.exceededBy(r.usage) {
		r.overBudget = true
		c.escalate(BudgetExceeded, w, r, fmt.Sprintf("item budget exceeded: %d tokens, $%.4f", r.usage.Tokens, r.usage.CostUSD), false, now)
	}
	if !c.halted && c.cfg.totalBudget.exceededBy(c.total) && !mutant.Active(mutant.NoBudget) {
		c.halted = true
		c.escalate(BudgetExceeded, nil, nil, fmt.Sprintf("dispatcher budget exceeded: %d tokens, $%.4f; no further work is assigned", c.total.Tokens, c.total.CostUSD), false, now)
	}
}
