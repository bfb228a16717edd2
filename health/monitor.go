package health

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/clock"
)

// Defaults of MonitorConfig.
const (
	// DefaultCrashBudget is how many crashes of one item are resumed; the
	// next pauses it: one crash may be bad luck, a second one is a pattern
	// a person should look at.
	DefaultCrashBudget = 1
	// DefaultProbeTimeout is how long a probed worker has to answer. A
	// second idle notification also confirms the crash sooner; the timeout
	// catches a worker that falls silent for good and never reports idle.
	DefaultProbeTimeout = 2 * time.Minute
)

// MonitorConfig configures a Monitor. Zero values mean the documented
// defaults; the services marked required must be set.
type MonitorConfig struct {
	// Clock drives the probe timers. Default: the wall clock.
	Clock foreman.Clock
	// ProbeTimeout is how long a probed worker has to answer; zero or
	// negative means the default. Default: 2 min (DefaultProbeTimeout).
	ProbeTimeout time.Duration
	// CrashBudget is how many crashes of one item are resumed; negative
	// means 0 (never resume, pause on the first crash). Default: 1
	// (DefaultCrashBudget).
	CrashBudget int
	// DisableLostCompletionSynthesis: by default a done marker on a watched
	// assignment, confirmed by the checkpoint, is completed from the
	// checkpoint, so that a completion message lost in transit does not
	// leave the item stuck. With this set, a done marker only leads to a
	// probe. Default: false (lost completions are synthesized).
	DisableLostCompletionSynthesis bool

	// Prober sends the status probe to a worker gone quiet. Required.
	Prober Prober
	// ItemChecker says whether an item is still open before a resume.
	// Required.
	ItemChecker ItemChecker
	// Escalator hands the escalation of a paused item to a person.
	// Required.
	Escalator Escalator
	// Resumer restarts a crashed item's work. Required.
	Resumer Resumer
	// Checkpoints loads an item's checkpoint. Required.
	Checkpoints CheckpointLoader
	// DoneMarkers enables lost-completion detection; Completer is then
	// required. Default: none (no lost-completion detection).
	DoneMarkers DoneMarkers
	// Completer completes an assignment from its checkpoint when a done
	// marker shows its completion was lost; required when DoneMarkers is
	// set. Default: none (unused without DoneMarkers).
	Completer Completer

	// OnTransition receives every protocol transition, including those
	// driven by the probe timer, which have no caller to return to. It is
	// called with the item's lock held: it must not call back into the
	// Monitor for the same item. Default: none (nil: not called).
	OnTransition func(Transition)
	// Logger receives the Monitor's logs. Default: none (nil discards them).
	Logger *slog.Logger
}

// Transition is one step of the protocol for one item, with what it produced.
type Transition struct {
	Item       foreman.ItemID
	Assignment foreman.AssignmentID // the assignment the event was about
	Event      EventKind
	From, To   State
	Effects    []Effect
	At         time.Time
	// Set when this step's effects produced them.
	Escalation *Escalation
	Resumed    *Resumed
	Completion *SynthesizedCompletion
}

// Outcome is where an item stands after a Monitor call, and what the call did.
type Outcome struct {
	Item       foreman.ItemID
	Assignment foreman.AssignmentID // current: the new one after a resume
	State      State
	Escalation *Escalation
	Resumed    *Resumed
	Completion *SynthesizedCompletion
}

// Errors of Monitor, matched with errors.Is.
var (
	// ErrStaleAssignment: the assignment is not the current one of any
	// watched item (finished, resumed under a new id, or never watched).
	ErrStaleAssignment = errors.New("health: stale or unknown assignment")
	ErrMissingService  = errors.New("health: required service missing")
)

// Monitor runs the crash-detection protocol (Step) for watched assignments:
// it sends probes, times them out, checks items are open, resumes, escalates
// and synthesizes lost completions through the services in its config.
// Calls for one item are serialized; different items proceed in parallel.
type Monitor struct {
	cfg    MonitorConfig
	clk    foreman.Clock
	budget int
	log    *slog.Logger
	ctx    context.Context // for timer-driven steps; cancelled by Close
	cancel context.CancelFunc

	mu           sync.Mutex
	items        map[foreman.ItemID]*watch
	byAssignment map[foreman.AssignmentID]*watch
	closed       bool
	timers       sync.WaitGroup
}

type watch struct {
	mu      sync.Mutex
	sub     Subject
	state   State
	pending []Effect
	gone    bool // forgotten or finished: ignore timer callbacks
	timer   foreman.Timer
	timerID uint64
	failure string                 // detail of the last service failure
	synth   *SynthesizedCompletion // prepared by the done-marker check
	out     *Outcome               // the call in progress
}

// NewMonitor checks cfg and returns a Monitor. Close it to stop its timers.
func NewMonitor(cfg MonitorConfig) (*Monitor, error) {
	var missing []string
	for name, ok := range map[string]bool{
		"Prober": cfg.Prober != nil, "ItemChecker": cfg.ItemChecker != nil, "Escalator": cfg.Escalator != nil,
		"Resumer": cfg.Resumer != nil, "Checkpoints": cfg.Checkpoints != nil,
		"Completer (with DoneMarkers)": cfg.DoneMarkers == nil || cfg.Completer != nil,
	} {
		if !ok {
			missing = append(missing, name)
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v", ErrMissingService, missing)
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = DefaultProbeTimeout
	}
	switch {
	case cfg.CrashBudget == 0:
		cfg.CrashBudget = DefaultCrashBudget
	case cfg.CrashBudget < 0:
		cfg.CrashBudget = 0
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Monitor{
		cfg: cfg, clk: cfg.Clock, budget: cfg.CrashBudget, log: cfg.Logger, ctx: ctx, cancel: cancel,
		items:        make(map[foreman.ItemID]*watch),
		byAssignment: make(map[foreman.AssignmentID]*watch),
	}, nil
}

// Config returns the configuration in effect, defaults filled in.
func (m *Monitor) Config() MonitorConfig { return m.cfg }

// Watch starts watching an assignment in phase Working.
func (m *Monitor) Watch(s Subject) error {
	for _, err := range []error{s.Item.Validate(), s.Assignment.Validate()} {
		if err != nil {
			return err
		}
	}
	if s.Worker != "" {
		if err := s.Worker.Validate(); err != nil {
			return err
		}
	}
	if s.Stage < 0 || s.Crashes < 0 {
		return fmt.Errorf("health: negative stage or crash count in %+v", s)
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.closed {
		return ErrClosed
	}
	if _, ok := m.items[s.Item]; ok {
		return fmt.Errorf("%w: item %s", ErrDuplicate, s.Item)
	}
	if _, ok := m.byAssignment[s.Assignment]; ok {
		return fmt.Errorf("%w: assignment %s", ErrDuplicate, s.Assignment)
	}
	w := &watch{sub: s, state: State{Phase: Working, Crashes: s.Crashes, Since: m.clk.Now()}}
	m.items[s.Item] = w
	m.byAssignment[s.Assignment] = w
	return nil
}

// State returns the protocol state of a watched item.
func (m *Monitor) State(item foreman.ItemID) (State, bool) {
	m.mu.Lock()
	w, ok := m.items[item]
	m.mu.Unlock()
	if !ok {
		return State{}, false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.state, true
}

// Forget stops watching item without any effect; it reports whether the
// item was watched.
func (m *Monitor) Forget(item foreman.ItemID) bool {
	m.mu.Lock()
	w, ok := m.items[item]
	m.mu.Unlock()
	if !ok {
		return false
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	m.finish(w)
	return true
}

// Idle reports that the assignment's worker went idle (or, through a
// liveness expiry, silent) without a completion. If its done marker exists
// the completion was lost and is synthesized (or probed for); otherwise the
// protocol flags it suspicious and probes, or, if already probed, confirms
// the crash.
func (m *Monitor) Idle(ctx context.Context, a foreman.AssignmentID) (Outcome, error) {
	return m.call(ctx, a, func(w *watch) (EventKind, bool, error) {
		ev, found, err := m.checkDoneMarker(ctx, w)
		if err != nil || !found {
			return EventIdle, true, err
		}
		if ev == EventDoneMarkerUnconfirmed && w.state.Phase == Suspicious {
			return EventIdle, true, nil
		}
		return ev, true, nil
	})
}

// Reply hands the Monitor a worker's answer to a probe. An answer that does
// not parse, or that is about another item or stage, is a *ReplyError and
// changes nothing: only a parseable status clears suspicion.
func (m *Monitor) Reply(ctx context.Context, a foreman.AssignmentID, text string) (Outcome, error) {
	return m.call(ctx, a, func(w *watch) (EventKind, bool, error) {
		r, err := ParseStatusReply(text)
		if err == nil && (r.Item != w.sub.Item || r.Stage != w.sub.Stage) {
			err = &ReplyError{Text: text, Reason: fmt.Sprintf("answers for %s stage %d, expected %s stage %d", r.Item, r.Stage, w.sub.Item, w.sub.Stage)}
		}
		if err != nil {
			m.log.Warn("health: unparseable status reply", "item", w.sub.Item, "assignment", a, "text", text)
			return 0, false, err
		}
		return EventStatusReply, true, nil
	})
}

// Completed reports that the assignment's completion was received and
// processed; the item is no longer watched.
func (m *Monitor) Completed(ctx context.Context, a foreman.AssignmentID) (Outcome, error) {
	return m.call(ctx, a, func(*watch) (EventKind, bool, error) { return EventCompleted, true, nil })
}

// CheckLostCompletion is the proactive check a host typically runs on
// every heartbeat: a done marker on a watched assignment means its
// completion was lost. Without a marker (or without DoneMarkers configured) it does nothing.
func (m *Monitor) CheckLostCompletion(ctx context.Context, a foreman.AssignmentID) (Outcome, error) {
	return m.call(ctx, a, func(w *watch) (EventKind, bool, error) {
		ev, found, err := m.checkDoneMarker(ctx, w)
		if ev == EventDoneMarkerUnconfirmed && w.state.Phase == Suspicious {
			return 0, false, err // a probe is already on its way
		}
		return ev, found, err
	})
}

// Retry re-issues effects left pending by a call that failed (a cancelled
// context, an escalation or completion the host could not take).
func (m *Monitor) Retry(ctx context.Context, item foreman.ItemID) (Outcome, error) {
	m.mu.Lock()
	w, ok := m.items[item]
	m.mu.Unlock()
	if !ok {
		return Outcome{Item: item}, fmt.Errorf("%w: item %s", ErrStaleAssignment, item)
	}
	return m.call(ctx, w.sub.Assignment, func(*watch) (EventKind, bool, error) { return 0, false, nil })
}

// Close stops every probe timer and waits for a timer-driven step in
// progress. It is safe to call more than once.
func (m *Monitor) Close() error {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return nil
	}
	m.closed = true
	watches := make([]*watch, 0, len(m.items))
	for _, w := range m.items {
		watches = append(watches, w)
	}
	m.mu.Unlock()
	m.cancel()
	for _, w := range watches {
		w.mu.Lock()
		m.stopTimer(w)
		w.mu.Unlock()
	}
	m.timers.Wait()
	return nil
}

// call runs one public operation on the watch that holds assignment a:
// re-issue pending effects, then apply the event decide returns, if any.
func (m *Monitor) call(ctx context.Context, a foreman.AssignmentID, decide func(*watch) (EventKind, bool, error)) (Outcome, error) {
	if err := ctx.Err(); err != nil {
		return Outcome{Assignment: a}, err
	}
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return Outcome{Assignment: a}, ErrClosed
	}
	w, ok := m.byAssignment[a]
	m.mu.Unlock()
	if !ok {
		return Outcome{Assignment: a}, fmt.Errorf("%w: %s", ErrStaleAssignment, a)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone || w.sub.Assignment != a {
		return Outcome{Item: w.sub.Item, Assignment: a}, fmt.Errorf("%w: %s", ErrStaleAssignment, a)
	}
	w.out = &Outcome{}
	ev, ok, err := decide(w)
	// Every event from Suspicious supersedes its pending probe; elsewhere
	// pending effects are re-issued first, and may end this assignment.
	if err == nil && (!ok || w.state.Phase != Suspicious) {
		err = m.drain(ctx, w)
		if err == nil && ok && (w.gone || w.sub.Assignment != a) {
			err = fmt.Errorf("%w: %s (superseded by re-issued effects)", ErrStaleAssignment, a)
		}
	}
	if err == nil && ok {
		err = m.apply(ctx, w, ev)
	}
	out := *w.out
	w.out = nil
	out.Item, out.Assignment, out.State = w.sub.Item, w.sub.Assignment, w.state
	return out, err
}

// apply steps the protocol and carries out the effects.
func (m *Monitor) apply(ctx context.Context, w *watch, ev EventKind) error {
	now := m.clk.Now()
	prev := w.state
	next, effects, err := Step(prev, Event{Kind: ev, At: now}, m.budget)
	if err != nil {
		return err
	}
	w.state = next
	w.pending = effects
	m.log.Debug("health: transition", "item", w.sub.Item, "event", ev, "from", prev.Phase, "to", next.Phase)
	tr := Transition{Item: w.sub.Item, Assignment: w.sub.Assignment, Event: ev, From: prev, To: next, Effects: effects, At: now}
	follow, ok, err := m.drainStep(ctx, w, &tr)
	if m.cfg.OnTransition != nil {
		m.cfg.OnTransition(tr)
	}
	if err != nil {
		return err
	}
	if ok {
		return m.apply(ctx, w, follow)
	}
	if next.Phase.Terminal() && len(w.pending) == 0 {
		m.finish(w)
	}
	return nil
}

// drain re-issues effects left pending by an earlier, failed call.
func (m *Monitor) drain(ctx context.Context, w *watch) error {
	if len(w.pending) == 0 {
		return nil
	}
	tr := Transition{Item: w.sub.Item, Assignment: w.sub.Assignment, From: w.state, To: w.state, At: m.clk.Now()}
	follow, ok, err := m.drainStep(ctx, w, &tr)
	if err != nil {
		return err
	}
	if ok {
		return m.apply(ctx, w, follow)
	}
	if w.state.Phase.Terminal() {
		m.finish(w)
	}
	return nil
}

// drainStep executes pending effects in order until one fails or yields a
// follow-up event. A failed effect stays pending.
func (m *Monitor) drainStep(ctx context.Context, w *watch, tr *Transition) (EventKind, bool, error) {
	for len(w.pending) > 0 {
		follow, ok, err := m.execute(ctx, w, w.pending[0], tr)
		if err != nil {
			return 0, false, err
		}
		w.pending = w.pending[1:]
		if ok {
			return follow, true, nil
		}
	}
	return 0, false, nil
}

// finish removes a watch from the maps; the caller holds w.mu.
func (m *Monitor) finish(w *watch) {
	w.gone = true
	m.stopTimer(w)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.items[w.sub.Item] == w {
		delete(m.items, w.sub.Item)
	}
	if m.byAssignment[w.sub.Assignment] == w {
		delete(m.byAssignment, w.sub.Assignment)
	}
}

func (m *Monitor) stopTimer(w *watch) {
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	w.timerID++
}

// onProbeTimeout runs on the probe timer; id guards against a timer that
// was stopped or replaced after it started firing.
func (m *Monitor) onProbeTimeout(w *watch, id uint64) {
	m.mu.Lock()
	if m.closed {
		m.mu.Unlock()
		return
	}
	m.timers.Add(1)
	m.mu.Unlock()
	defer m.timers.Done()
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.gone || w.timerID != id || w.state.Phase != Probing {
		return
	}
	w.timer = nil
	w.out = &Outcome{} // nobody to return it to: OnTransition reports it
	defer func() { w.out = nil }()
	if err := m.apply(m.ctx, w, EventProbeTimeout); err != nil {
		m.log.Error("health: probe timeout handling failed", "item", w.sub.Item, "err", err)
	}
}
