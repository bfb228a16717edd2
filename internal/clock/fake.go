package clock

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// Fake is a manually advanced clock. Timers fire only inside Advance or Set,
// in deadline order (ties in creation order), so tests are deterministic and
// never sleep. AfterFunc callbacks run synchronously on the goroutine that
// calls Advance, without the clock's lock held, so they may use the clock.
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	timers  fakeHeap
	changed chan struct{} // closed and replaced whenever the set of timers changes
}

// NewFake returns a fake clock reading start.
func NewFake(start time.Time) *Fake {
	return &Fake{now: start, changed: make(chan struct{})}
}

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// Since returns the fake time elapsed since t.
func (f *Fake) Since(t time.Time) time.Duration { return f.Now().Sub(t) }

// NewTimer returns a timer firing when the clock is advanced past d.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1)}
	f.arm(t, d)
	return t
}

// AfterFunc arranges for fn to run inside Advance once d has elapsed.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{clock: f, fn: fn}
	f.arm(t, d)
	return t
}

// NewTicker returns a ticker driven by Advance.
func (f *Fake) NewTicker(d time.Duration) Ticker {
	if d <= 0 {
		panic("clock: non-positive interval for NewTicker")
	}
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1), period: d}
	f.arm(t, d)
	return fakeTicker{t}
}

// Advance moves the clock forward by d, firing every timer that falls due,
// in order. Timers armed by callbacks during the advance fire too if they
// fall due before the end of it.
func (f *Fake) Advance(d time.Duration) {
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.advanceTo(target)
}

// Set moves the clock to t (never backwards), firing due timers.
func (f *Fake) Set(t time.Time) { f.advanceTo(t) }

// Pending reports how many timers and tickers are armed.
func (f *Fake) Pending() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.timers)
}

// BlockUntil waits until at least n timers are armed, so a test can advance
// the clock only after the code under test has started waiting on it.
func (f *Fake) BlockUntil(ctx context.Context, n int) error {
	for {
		f.mu.Lock()
		if len(f.timers) >= n {
			f.mu.Unlock()
			return nil
		}
		ch := f.changed
		f.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// NextDeadline reports when the earliest armed timer fires.
func (f *Fake) NextDeadline() (time.Time, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.timers) == 0 {
		return time.Time{}, false
	}
	return f.timers[0].when, true
}

func (f *Fake) advanceTo(target time.Time) {
	for {
		f.mu.Lock()
		if len(f.timers) == 0 || f.timers[0].when.After(target) {
			if target.After(f.now) {
				f.now = target
			}
			f.mu.Unlock()
			return
		}
		t := heap.Pop(&f.timers).(*fakeTimer)
		t.index = -1
		if t.when.After(f.now) {
			f.now = t.when
		}
		now := f.now
		if t.period > 0 {
			t.when = now.Add(t.period)
			t.seq = f.nextSeq()
			heap.Push(&f.timers, t)
		}
		f.notifyLocked()
		fn, ch := t.fn, t.ch
		f.mu.Unlock()
		if fn != nil {
			fn()
		} else {
			select {
			case ch <- now:
			default:
			}
		}
	}
}

func (f *Fake) arm(t *fakeTimer, d time.Duration) {
	f.mu.Lock()
	defer f.mu.Unlock()
	t.when = f.now.Add(d)
	t.seq = f.nextSeq()
	heap.Push(&f.timers, t)
	f.notifyLocked()
}

// disarm removes t from the heap and reports whether it was armed.
func (f *Fake) disarm(t *fakeTimer) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.disarmLocked(t)
}

func (f *Fake) disarmLocked(t *fakeTimer) bool {
	if t.index < 0 {
		return false
	}
	heap.Remove(&f.timers, t.index)
	t.index = -1
	f.notifyLocked()
	return true
}

func (f *Fake) nextSeq() uint64 { f.seq++; return f.seq }

func (f *Fake) notifyLocked() {
	close(f.changed)
	f.changed = make(chan struct{})
}

type fakeTimer struct {
	clock  *Fake
	ch     chan time.Time
	fn     func()
	period time.Duration
	when   time.Time
	seq    uint64
	index  int
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }
func (t *fakeTimer) Stop() bool          { return t.clock.disarm(t) }

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := f.disarmLocked(t)
	if t.period > 0 {
		t.period = d
	}
	t.when = f.now.Add(d)
	t.seq = f.nextSeq()
	heap.Push(&f.timers, t)
	f.notifyLocked()
	return was
}

type fakeTicker struct{ t *fakeTimer }

func (k fakeTicker) C() <-chan time.Time   { return k.t.ch }
func (k fakeTicker) Stop()                 { k.t.Stop() }
func (k fakeTicker) Reset(d time.Duration) { k.t.Reset(d) }

type fakeHeap []*fakeTimer

func (h fakeHeap) Len() int { return len(h) }
func (h fakeHeap) Less(i, j int) bool {
	if h[i].when.Equal(h[j].when) {
		return h[i].seq < h[j].seq
	}
	return h[i].when.Before(h[j].when)
}
func (h fakeHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = i
	h[j].index = j
}
func (h *fakeHeap) Push(x any) {
	t := x.(*fakeTimer)
	t.index = len(*h)
	*h = append(*h, t)
}
func (h *fakeHeap) Pop() any {
	old := *h
	n := len(old)
	t := old[n-1]
	old[n-1] = nil
	*h = old[:n-1]
	return t
}
