package health

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
)

// DeadlineKind names one of the three independent deadlines of a subject.
type DeadlineKind uint8

const (
	// Liveness expires when a subject sends neither heartbeats nor progress
	// for LivenessTimeout: the worker is probably gone.
	Liveness DeadlineKind = iota
	// Progress expires when a subject makes no meaningful progress (status
	// change, commit, quality-gate result, ready for review) for
	// ProgressTimeout, however often it heartbeats: the worker is probably stuck.
	Progress
	// Attempt expires AttemptTimeout after the subject was added and is never
	// moved: the assignment has taken too long, alive and busy or not.
	Attempt
	numDeadlineKinds
)

func (k DeadlineKind) String() string {
	switch k {
	case Liveness:
		return "liveness"
	case Progress:
		return "progress"
	case Attempt:
		return "attempt"
	}
	return fmt.Sprintf("DeadlineKind(%d)", uint8(k))
}

// Defaults of DeadlineConfig: a worker heartbeats every 10 s, is presumed
// gone after 45 s of silence (four missed beats), and stuck after 15 min
// without meaningful progress, however often it heartbeats.
const (
	DefaultHeartbeatInterval = 10 * time.Second
	DefaultLivenessTimeout   = 45 * time.Second
	DefaultProgressTimeout   = 15 * time.Minute
)

// JitterSource yields a random int64 in [0, n); *math/rand/v2.Rand is one.
type JitterSource interface {
	Int64N(n int64) int64
}

// Expiry reports that one deadline of one subject passed. It is delivered
// once per deadline: a liveness or progress deadline that expired is armed
// again only by the subject's next Heartbeat or Progress (a new deadline);
// the attempt deadline is never re-armed.
type Expiry struct {
	Subject  foreman.AssignmentID
	Kind     DeadlineKind
	Deadline time.Time // when the deadline fell due (jitter included)
	// At is when this Expiry is handed to OnExpiry: the clock is read just
	// before the call.
	At time.Time
	// Late is At - Deadline: everything between the deadline and the hook
	// being called, that is the timer's own delay, collecting the due
	// deadlines, and the OnExpiry calls that came before this one in the
	// same firing (a slow hook makes the expiries after it later).
	Late time.Duration
}

// DeadlineConfig configures Deadlines. The zero value of every field means
// its documented default.
type DeadlineConfig struct {
	// Clock drives every deadline. Default: the wall clock.
	Clock foreman.Clock
	// HeartbeatInterval is how often a worker is expected to heartbeat.
	// Deadlines does not use it; it is here so that the worker side and the
	// watching side read one configuration. Default: 10 s
	// (DefaultHeartbeatInterval).
	HeartbeatInterval time.Duration
	// LivenessTimeout is how long a subject may go without a heartbeat;
	// negative disables the liveness deadline. Default: 45 s
	// (DefaultLivenessTimeout).
	LivenessTimeout time.Duration
	// ProgressTimeout is how long a subject may go without progress;
	// negative disables the progress deadline. Default: 15 min
	// (DefaultProgressTimeout).
	ProgressTimeout time.Duration
	// AttemptTimeout bounds a whole attempt; zero or negative means no
	// attempt deadline. Default: none (how long an assignment may take
	// depends too much on the work for one figure to suit).
	AttemptTimeout time.Duration
	// Jitter, when positive, adds a random extra in [0, Jitter) to every
	// deadline as it is set, so that subjects started together do not all
	// expire in the same instant. Default: 0 (no jitter).
	Jitter time.Duration
	// Rand supplies the jitter. Inject a seeded *rand.Rand for deterministic
	// tests. Deadlines calls it with its lock held, so it need not be safe
	// for concurrent use. Default: math/rand/v2's global source.
	Rand JitterSource
	// OnExpiry receives every expiry. Calls are serialized, in deadline
	// order within one firing, and made without Deadlines' lock held, so the
	// hook may call Heartbeat, Progress or Remove; it must not call Close.
	// Expiry.Late is measured as the hook is called, so a slow hook delays
	// (and shows up in the Late of) the expiries delivered after it.
	// Default: none (nil: expiries are not delivered).
	OnExpiry func(Expiry)
	// Logger receives Deadlines' logs. Default: none (nil discards them).
	Logger *slog.Logger
}

func (c DeadlineConfig) withDefaults() DeadlineConfig {
	c.Clock = clock.OrReal(c.Clock)
	if c.HeartbeatInterval == 0 {
		c.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if c.LivenessTimeout == 0 {
		c.LivenessTimeout = DefaultLivenessTimeout
	}
	if c.ProgressTimeout == 0 {
		c.ProgressTimeout = DefaultProgressTimeout
	}
	if c.AttemptTimeout < 0 {
		c.AttemptTimeout = 0
	}
	if c.Jitter < 0 {
		c.Jitter = 0
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

// Errors of Deadlines, matched with errors.Is.
var (
	ErrClosed         = errors.New("health: closed")
	ErrUnknownSubject = errors.New("health: unknown subject")
	ErrDuplicate      = errors.New("health: subject already tracked")
)

// Deadlines tracks the liveness, progress and attempt deadlines of many
// subjects on one clock timer.
//
// Design: every armed deadline has one entry in a min-heap keyed by its
// scheduled time, and one timer is armed for the heap's minimum. A heartbeat
// that pushes a deadline later only overwrites the deadline in place: the
// heap entry keeps its earlier scheduled time and, when it reaches the top,
// is re-pushed at the real deadline instead of firing. A heartbeat therefore
// costs a map lookup and a few stores (O(1)); heap work, O(log n), happens at
// most once per timeout period per deadline, and nothing ever scans all
// subjects.
type Deadlines struct {
	cfg    DeadlineConfig
	clk    foreman.Clock
	epoch  time.Time
	fireMu sync.Mutex // serializes firing, so OnExpiry calls never overlap

	mu       sync.Mutex
	subjects map[foreman.AssignmentID]*subject
	heap     deadlineHeap
	timer    foreman.Timer
	armedFor int64 // offset the timer is armed for; valid when armed
	armed    bool
	closed   bool
	inFlight sync.WaitGroup
}

type subject struct {
	id    foreman.AssignmentID
	slots [numDeadlineKinds]deadline
}

// deadline is one deadline of one subject. due is the real deadline; sched
// (<= due) is where its heap entry sits. Times are nanoseconds since epoch.
type deadline struct {
	due   int64
	sched int64
	index int32 // position in the heap, -1 when not in it
	kind  DeadlineKind
	sub   *subject
}

// NewDeadlines returns a tracker with no subjects. Close it to stop its timer.
func NewDeadlines(cfg DeadlineConfig) *Deadlines {
	cfg = cfg.withDefaults()
	return &Deadlines{
		cfg:      cfg,
		clk:      cfg.Clock,
		epoch:    cfg.Clock.Now(),
		subjects: make(map[foreman.AssignmentID]*subject),
	}
}

// Config returns the configuration in effect, defaults filled in.
func (d *Deadlines) Config() DeadlineConfig { return d.cfg }

// Add starts tracking id: its liveness, progress and attempt deadlines run
// from now. Adding an id that is already tracked is ErrDuplicate.
func (d *Deadlines) Add(id foreman.AssignmentID) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.closed {
		return ErrClosed
	}
	if _, ok := d.subjects[id]; ok {
		return fmt.Errorf("%w: %s", ErrDuplicate, id)
	}
	s := &subject{id: id}
	for k := range s.slots {
		s.slots[k] = deadline{index: -1, kind: DeadlineKind(k), sub: s}
	}
	d.subjects[id] = s
	d.setLocked(&s.slots[Liveness], now, d.cfg.LivenessTimeout)
	d.setLocked(&s.slots[Progress], now, d.cfg.ProgressTimeout)
	d.setLocked(&s.slots[Attempt], now, d.cfg.AttemptTimeout)
	return nil
}

// Heartbeat moves id's liveness deadline, and nothing else.
func (d *Deadlines) Heartbeat(id foreman.AssignmentID) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.lookupLocked(id)
	if err != nil {
		return err
	}
	d.setLocked(&s.slots[Liveness], now, d.cfg.LivenessTimeout)
	return nil
}

// Progress records a meaningful event: it moves id's progress deadline and,
// since a subject that makes progress is alive, its liveness deadline too.
func (d *Deadlines) Progress(id foreman.AssignmentID) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.lookupLocked(id)
	if err != nil {
		return err
	}
	d.setLocked(&s.slots[Liveness], now, d.cfg.LivenessTimeout)
	d.setLocked(&s.slots[Progress], now, d.cfg.ProgressTimeout)
	return nil
}

// ExtendProgress moves id's progress deadline to d from now, and nothing
// else: a subject that shows evidence of work without meaningful progress
// gets more time, while its liveness is still watched. A non-positive d
// leaves the deadline disarmed until the next Progress.
func (d *Deadlines) ExtendProgress(id foreman.AssignmentID, ext time.Duration) error {
	now := d.now()
	d.mu.Lock()
	defer d.mu.Unlock()
	s, err := d.lookupLocked(id)
	if err != nil {
		return err
	}
	d.setLocked(&s.slots[Progress], now, ext)
	return nil
}

// Remove stops tracking id; it reports whether id was tracked.
func (d *Deadlines) Remove(id foreman.AssignmentID) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	s, ok := d.subjects[id]
	if !ok {
		return false
	}
	for k := range s.slots {
		if i := s.slots[k].index; i >= 0 {
			d.heap.remove(int(i))
		}
	}
	delete(d.subjects, id)
	// The timer may now be armed early; it re-arms itself when it fires.
	return true
}

// Len reports how many subjects are tracked.
func (d *Deadlines) Len() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return len(d.subjects)
}

// Close stops the timer and waits for an expiry delivery in progress. It is
// safe to call more than once; after it, every method returns ErrClosed.
func (d *Deadlines) Close() error {
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return nil
	}
	d.closed = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = false
	d.mu.Unlock()
	d.inFlight.Wait()
	return nil
}

func (d *Deadlines) now() int64 { return int64(d.clk.Since(d.epoch)) }

func (d *Deadlines) lookupLocked(id foreman.AssignmentID) (*subject, error) {
	if d.closed {
		return nil, ErrClosed
	}
	s, ok := d.subjects[id]
	if !ok {
		return nil, fmt.Errorf("%w: %s", ErrUnknownSubject, id)
	}
	return s, nil
}

// setLocked arms dl to fall due timeout (plus jitter) after now; a
// non-positive timeout leaves it disarmed.
func (d *Deadlines) setLocked(dl *deadline, now int64, timeout time.Duration) {
	if timeout <= 0 {
		return
	}
	due := now + int64(timeout)
	if d.cfg.Jitter > 0 {
		if d.cfg.Rand != nil {
			due += d.cfg.Rand.Int64N(int64(d.cfg.Jitter))
		} else {
			due += rand.Int64N(int64(d.cfg.Jitter))
		}
	}
	dl.due = due
	switch {
	case dl.index < 0:
		dl.sched = due
		d.heap.push(dl)
	case due < dl.sched:
		// Only jitter can pull a deadline earlier than its heap entry.
		dl.sched = due
		d.heap.fix(int(dl.index))
	default:
		return // the entry fires early and is re-pushed then
	}
	d.armLocked()
}

// armLocked makes sure the timer fires no later than the heap's minimum.
func (d *Deadlines) armLocked() {
	if d.closed || len(d.heap) == 0 {
		return
	}
	next := d.heap[0].sched
	if d.armed && d.armedFor <= next {
		return
	}
	wait := time.Duration(next - d.now())
	if wait < 0 {
		wait = 0
	}
	if d.timer == nil {
		d.timer = d.clk.AfterFunc(wait, d.fire)
	} else {
		d.timer.Reset(wait)
	}
	d.armed, d.armedFor = true, next
}

// fire collects every deadline that is due, re-arms the timer and delivers
// the expiries.
func (d *Deadlines) fire() {
	d.fireMu.Lock()
	defer d.fireMu.Unlock()
	d.mu.Lock()
	if d.closed {
		d.mu.Unlock()
		return
	}
	d.inFlight.Add(1)
	defer d.inFlight.Done()
	d.armed = false
	now := d.now()
	var expired []Expiry
	for len(d.heap) > 0 && d.heap[0].sched <= now {
		dl := d.heap[0]
		if dl.due > now {
			dl.sched = dl.due
			d.heap.fix(0)
			continue
		}
		d.heap.remove(0)
		expired = append(expired, Expiry{
			Subject:  dl.sub.id,
			Kind:     dl.kind,
			Deadline: d.epoch.Add(time.Duration(dl.due)),
		})
	}
	d.armLocked()
	d.mu.Unlock()
	for _, e := range expired {
		// Measured at delivery, so that Late is what the hook sees.
		e.At = d.clk.Now()
		e.Late = e.At.Sub(e.Deadline)
		d.cfg.Logger.Debug("health: deadline expired", "subject", e.Subject, "kind", e.Kind, "late", e.Late)
		if d.cfg.OnExpiry != nil {
			d.cfg.OnExpiry(e)
		}
	}
}

// deadlineHeap is a min-heap on sched, written out rather than through
// container/heap to keep the hot path free of interface calls.
type deadlineHeap []*deadline

func (h *deadlineHeap) push(dl *deadline) {
	dl.index = int32(len(*h))
	*h = append(*h, dl)
	h.up(len(*h) - 1)
}

func (h *deadlineHeap) remove(i int) {
	old := *h
	last := len(old) - 1
	old[i].index = -1
	if i != last {
		old[i] = old[last]
		old[i].index = int32(i)
	}
	old[last] = nil
	*h = old[:last]
	if i != last {
		h.fix(i)
	}
}

func (h deadlineHeap) fix(i int) {
	if !h.down(i) {
		h.up(i)
	}
}

func (h deadlineHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].sched <= h[i].sched {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h deadlineHeap) down(i0 int) bool {
	i, n := i0, len(h)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		c := l
		if r := l + 1; r < n && h[r].sched < h[l].sched {
			c = r
		}
		if h[i].sched <= h[c].sched {
			break
		}
		h.swap(i, c)
		i = c
	}
	return i > i0
}

func (h deadlineHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index = int32(i)
	h[j].index = int32(j)
}
