package teamsim

import (
	"container/heap"
	"context"
	"fmt"
	"hash"
	"hash/fnv"
	"math/rand/v2"
	"time"

	"github.com/agentforeman/foreman"
)

// epoch is when every simulation starts.
var epoch = time.Date(2026, 1, 5, 9, 0, 0, 0, time.UTC)

// Run simulates one team from cfg.Seed to its end (every story merged or
// waiting for a person), or to cfg.MaxSteps or cfg.MaxTime, checking every
// invariant after every step. The returned error is a Config the
// simulator cannot run; a broken invariant is a Violation in the Result.
func Run(ctx context.Context, cfg Config) (Result, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return Result{}, err
	}
	w := newWorld(ctx, cfg)
	w.run()
	return w.result(), nil
}

// crashSignal unwinds the coordinator's stack at a crash point: whatever
// it was doing is lost, as a SIGKILL would lose it.
type crashSignal struct{ where string }

// event is one thing that happens at a point of simulated time. inc ties
// it to one coordinator process (0: to none, it outlives crashes).
type event struct {
	at    time.Time
	seq   uint64
	inc   int
	label string
	fn    func()
}

type eventHeap []*event

func (h eventHeap) Len() int { return len(h) }
func (h eventHeap) Less(i, j int) bool {
	if !h[i].at.Equal(h[j].at) {
		return h[i].at.Before(h[j].at)
	}
	return h[i].seq < h[j].seq
}
func (h eventHeap) Swap(i, j int) { h[i], h[j] = h[j], h[i] }
func (h *eventHeap) Push(x any)   { *h = append(*h, x.(*event)) }
func (h *eventHeap) Pop() any {
	old := *h
	e := old[len(old)-1]
	*h = old[:len(old)-1]
	return e
}

// world is everything that survives a coordinator crash: the store, the
// repository, the agents' processes, the plan, the event queue, and the
// checks' memory.
type world struct {
	ctx     context.Context
	cfg     Config
	rng     *rand.Rand
	queue   eventHeap
	seq     uint64
	clk     *foreman.FakeClock
	store   *simStore
	repo    *simRepo
	stories map[foreman.ItemID]*story
	order   []foreman.ItemID
	c       *coord
	inc     int
	crashes int
	// noCrash is set while crashes are not simulated (building the plan).
	noCrash bool
	steps   int
	end     string
	hash    hash.Hash64
	trace   []string
	label   string
	checks  checkState
	agents  agentTable
	person  personState
	// violations found; the first of each invariant is kept.
	violations []Violation
}

// story is one story of the plan.
type story struct {
	id    foreman.ItemID
	after []foreman.ItemID
	// conflicts: it changes the file other stories marked so change: its
	// merge conflicts if one of them landed since its branch started
	// (simRepo).
	conflicts bool
}

func newWorld(ctx context.Context, cfg Config) *world {
	w := &world{ctx: ctx, cfg: cfg, rng: rand.New(rand.NewPCG(cfg.Seed, cfg.Seed^0x9e3779b97f4a7c15)),
		clk: foreman.NewFakeClock(epoch), stories: map[foreman.ItemID]*story{}, hash: fnv.New64a()}
	w.store = newSimStore(w)
	w.repo = newSimRepo(w)
	w.agents.init()
	w.checks.init()
	w.person.init()
	if w.cfg.TotalBudget == 0 {
		w.cfg.TotalBudget = 20_000 + 1_000*w.rng.Int64N(101)
	}
	n := 1 + w.rng.IntN(cfg.Stories)
	for i := range n {
		s := &story{id: foreman.ItemID(fmt.Sprintf("S%d", i+1)), conflicts: w.rng.Float64() < cfg.Faults.Conflict}
		for j := range i {
			if len(s.after) < 2 && w.rng.Float64() < 0.25 {
				s.after = append(s.after, foreman.ItemID(fmt.Sprintf("S%d", j+1)))
			}
		}
		w.stories[s.id] = s
		w.order = append(w.order, s.id)
	}
	return w
}

func (w *world) now() time.Time { return w.clk.Now() }

// schedule queues fn to run after d, as part of coordinator process inc
// (0: of none).
func (w *world) schedule(d time.Duration, inc int, label string, fn func()) {
	w.seq++
	heap.Push(&w.queue, &event{at: w.now().Add(d), seq: w.seq, inc: inc, label: label, fn: fn})
}

// delay is a message's transit time: usually none, sometimes up to
// Faults.MaxDelay (so that messages overtake one another).
func (w *world) delay() time.Duration {
	f := w.cfg.Faults
	if f.MaxDelay > 0 && w.rng.Float64() < f.Delay {
		return time.Duration(w.rng.Int64N(int64(f.MaxDelay)))
	}
	return 0
}

// crashPoint may crash the coordinator here.
func (w *world) crashPoint(where string) {
	f := w.cfg.Faults
	if w.noCrash || w.crashes >= f.Crashes || f.CrashPoint <= 0 {
		return
	}
	if w.rng.Float64() < f.CrashPoint {
		panic(crashSignal{where: where})
	}
}

func (w *world) tracef(format string, args ...any) {
	line := fmt.Sprintf(format, args...)
	w.hash.Write([]byte(line))
	w.hash.Write([]byte{'\n'})
	if w.cfg.Trace {
		w.trace = append(w.trace, fmt.Sprintf("%6d %8s %s", w.steps, w.now().Sub(epoch).Truncate(time.Second), line))
	}
}

func (w *world) run() {
	w.noCrash = true
	w.c = w.boot()
	w.noCrash = false
	if w.c == nil {
		w.end = "boot failed"
		return
	}
	w.c.begin()
	w.check()
	limit := epoch.Add(w.cfg.MaxTime)
	for {
		switch {
		case w.ctx.Err() != nil:
			w.end = "cancelled"
			return
		case w.c.finished && w.person.pending == 0:
			w.end = "finished"
			w.checkEnd()
			return
		case w.c.finished && !w.c.stopped:
			// The Run returned while a person is still to decide: its
			// process stops (its agents and timers with it), and the
			// host runs the team again once the decision is made.
			w.c.stopped = true
			w.tracef("the Run ended; a person is still to decide")
			w.agents.killAll(w.inc)
			w.inc++
			w.clk = foreman.NewFakeClock(w.now())
		case w.steps >= w.cfg.MaxSteps:
			w.end = "step limit"
			w.checkEnd()
			return
		case !w.now().Before(limit):
			w.end = "time limit"
			w.checkEnd()
			return
		}
		var next *event
		if len(w.queue) > 0 {
			next = w.queue[0]
		}
		dl, timer := w.clk.NextDeadline()
		if next == nil && !timer {
			w.end = "quiet"
			if w.c != nil && w.c.pool != nil && w.c.pool.Stats().Halted {
				// The pool spent its budget and assigns nothing more: the
				// stories still running wait for a person to raise it.
				w.end = "budget spent"
			}
			w.checkEnd()
			return
		}
		if timer && (next == nil || !dl.After(next.at)) {
			w.step("timers", func() { w.clk.Set(dl) })
			continue
		}
		heap.Pop(&w.queue)
		if next.inc != 0 && next.inc != w.inc {
			continue // the process it belonged to is gone
		}
		if next.at.After(w.now()) {
			w.clk.Set(next.at)
		}
		w.step(next.label, next.fn)
	}
}

// step runs one event, restarts the coordinator if it crashed, and checks
// every invariant.
func (w *world) step(label string, fn func()) {
	w.steps++
	w.label = label
	w.tracef("%s", label)
	if where, crashed := w.guard(fn); crashed {
		w.restart(where)
	}
	w.check()
}

// guard runs fn and reports a crash it simulated.
func (w *world) guard(fn func()) (where string, crashed bool) {
	defer func() {
		if r := recover(); r != nil {
			cs, ok := r.(crashSignal)
			if !ok {
				panic(r)
			}
			where, crashed = cs.where, true
		}
	}()
	fn()
	return "", false
}

// rerun is the host running the team again after its Run ended.
func (w *world) rerun() {
	w.tracef("the host runs the team again")
	w.c = w.boot()
	w.c.begin()
}

// restart is a coordinator crash: every in-memory state of the process
// goes (the runtimes, the worker pool, its timers, the agents it started,
// which the lease reaper stops), and a new process recovers from the
// store and the repository. A crash while recovering restarts again.
func (w *world) restart(where string) {
	for {
		w.crashes++
		w.tracef("CRASH at %s (crash %d)", where, w.crashes)
		w.agents.killAll(w.inc)
		w.clk = foreman.NewFakeClock(w.now())
		w.c = w.boot()
		if w.c == nil {
			w.end = "boot failed"
			return
		}
		var crashed bool
		where, crashed = w.guard(w.c.begin)
		if !crashed {
			return
		}
	}
}
