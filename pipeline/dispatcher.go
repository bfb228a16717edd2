package pipeline

import (
	"context"
	"errors"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/internal/spawnrules"
	"github.com/agentforeman/foreman/worker"
)

// DispatcherSpawnerConfig configures a DispatcherSpawner. Worker.Agent,
// Workspace and Inbox are required.
type DispatcherSpawnerConfig struct {
	// Worker configures the worker.Dispatcher the spawner creates and owns.
	// Worker.Agent runs every stage (for example an agentcmd.Driver); it is
	// wrapped so that the agent's report reaches the Inbox. Three fields are
	// set by the spawner: Mode is ModeFresh (a fresh worker for every
	// stage), and CrashBudget and StallBudget are 0, so that an
	// assignment whose worker fails, falls silent or stalls is parked at
	// once and the pipeline's own crash protocol decides what follows (its
	// crash budget, the story-{id}-s{N}-retry worker, the resume from the
	// checkpoint). Worker.Transport must be nil: the report is read from the
	// in-process Runtime's agent. Worker.OnEvent is called before the
	// spawner's own hook. Everything else (MaxWorkers, the liveness,
	// progress and probe timeouts, budgets, Escalator, Clock) is the host's.
	// Worker.Agent is required. Default: worker.Config's defaults for the
	// rest.
	Worker worker.Config
	// Workspace returns the item's worktree (merge.Manager.Path). Required.
	Workspace func(item foreman.ItemID) (string, error)
	// Prompt renders the stage's task; the assignment block
	// (AssignmentBlock) is appended. Default: DefaultPrompt.
	Prompt func(r SpawnRequest) string
	// Checkpoints, when set, lets a Resume spawn continue the crashed
	// agent's session or add the CHECKPOINT RESUME block. Default: none
	// (nil: a Resume spawn gets the plain prompt and a fresh session).
	Checkpoints health.CheckpointLoader
	// Inbox receives each agent's report and, for an assignment that ended
	// without one (completed silently, or parked by the Dispatcher),
	// EventIdle; EventStatusReply and EventProbeTimeout answer probes.
	// Required.
	Inbox Inbox
	// Timeouts bound each execution by stage (on top of
	// Worker.AgentTimeout). Default: none (the zero value: no limit but
	// Worker.AgentTimeout).
	Timeouts StageTimeouts
	// ProbeTimeout is how long a probed assignment that this spawner knows
	// of but the Dispatcher does not hold yet has before EventProbeTimeout is
	// reported, on Worker.Clock. One the Dispatcher has finished with, or
	// this spawner never ran, gets EventProbeTimeout at once. Default: 2 min
	// (health.DefaultProbeTimeout; zero or negative: the default).
	ProbeTimeout time.Duration
	// Review, when set, reviews the work of every stage RequireReview
	// names (all of them when RequireReview is nil) before the stage
	// completes. The agent's successful execution makes the assignment
	// ready for review; Review's verdict goes to Dispatcher.Review: an
	// approval completes the stage with the agent's report, a rejection
	// gives the stage to a fresh worker with every reviewer's feedback in
	// its prompt (worker.Assignment.MemoryContext), and the rejection after
	// Worker.MaxReviewRejections ends the stage with an ERROR report that
	// carries the last feedback, which pauses the item. Default: none
	// (nil: no review; the agent's successful execution completes the
	// stage).
	Review ReviewFunc
	// RequireReview names the stages Review reviews; it is not called
	// when Review is nil. Default: none (nil: every stage).
	RequireReview func(r SpawnRequest) bool
	// Logger receives a record per assignment that ended without a report
	// and per probe answer or review verdict that could not be delivered.
	// Default: none (nil discards them).
	Logger *slog.Logger
}

// DispatcherSpawner is a Spawner and Messenger that runs each assignment
// through a worker.Dispatcher, so that stages get its liveness and
// progress supervision, probes, kills, budgets and escalations. Each spawn
// is submitted as a worker.Item whose ID is the pipeline's AssignmentID:
// the Dispatcher's own assignment ids fence its messages, and the
// pipeline's fence the reports, which carry the pipeline's sender and
// assignment.
//
// The agent's report (a ReportingAgent's typed one, else the last canonical
// line of its final message, else of its output) is delivered to the Inbox
// as a message.Envelope when the Dispatcher completes the assignment. An assignment the Dispatcher parks
// (agent failed, silent and unanswering, stalled, over budget) or that
// completes without a report is reported as EventIdle, which starts the
// pipeline's crash protocol. A probe is answered with EventStatusReply
// while the Dispatcher still holds the assignment (queued or running: it
// watches the worker itself); for an assignment the Dispatcher has finished
// with (its worker failed or was killed) or one this spawner never ran (a
// coordinator restart), EventProbeTimeout follows at once, since nobody is
// working on it; otherwise after ProbeTimeout. A shutdown request cancels
// the assignment's agent; an ACK needs no delivery (the execution ended
// with its report).
//
// Spawn is idempotent by assignment within the process. After a
// coordinator restart (a new spawner and Dispatcher) a re-issued spawn
// runs the assignment again.
type DispatcherSpawner struct {
	cfg   DispatcherSpawnerConfig
	d     *worker.Dispatcher
	clk   foreman.Clock
	log   *slog.Logger
	agent phases.AgentDriver
	hook  worker.EventHook

	mu sync.Mutex
	// spawns holds the spawner's decisions (pipeline/internal/spawnrules,
	// shared with the simulator's pool bridge): the assignments submitted
	// whose end has not been reported yet, and the ids of those whose end
	// was (a tombstone: the id alone, not the request, the prompt or the
	// report), so that a spawn issued again is still a no-op and a probe
	// of one is answered at once, while what a finished assignment no
	// longer needs is freed.
	spawns *spawnrules.Table[*dispatched]
	probes map[foreman.AssignmentID]clock.Timer
	closed bool
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// dispatched is what the spawner keeps about one assignment submitted to
// the Dispatcher (whether it ended or was shut down is its
// spawnrules.Entry's).
type dispatched struct {
	req     SpawnRequest
	session string
	// cancel stops the agent's execution while it runs.
	cancel context.CancelFunc
	// report is the agent's report, once its execution ended with one.
	report agentReport
	// lastReview is the latest reviewer's feedback; reviewLimit says why
	// the Dispatcher gave up on the reviews (REVIEW_LIMIT), if it did.
	lastReview, reviewLimit string
}

// NewDispatcherSpawner checks cfg, starts the Dispatcher and returns the
// spawner. Close it to stop the Dispatcher and its agents.
func NewDispatcherSpawner(cfg DispatcherSpawnerConfig) (*DispatcherSpawner, error) {
	if cfg.Worker.Agent == nil || cfg.Workspace == nil || cfg.Inbox == nil {
		return nil, errors.New("pipeline: DispatcherSpawnerConfig needs Worker.Agent, Workspace and Inbox")
	}
	if cfg.Worker.Transport != nil {
		return nil, errors.New("pipeline: DispatcherSpawnerConfig.Worker.Transport must be nil (reports are read from the in-process agent)")
	}
	if cfg.Prompt == nil {
		cfg.Prompt = DefaultPrompt
	}
	if cfg.ProbeTimeout <= 0 {
		cfg.ProbeTimeout = health.DefaultProbeTimeout
	}
	ctx, cancel := context.WithCancel(context.Background())
	s := &DispatcherSpawner{cfg: cfg, clk: clock.OrReal(cfg.Worker.Clock), log: logger(cfg.Logger),
		agent: cfg.Worker.Agent, hook: cfg.Worker.OnEvent,
		spawns: spawnrules.New[*dispatched](), probes: map[foreman.AssignmentID]clock.Timer{},
		ctx: ctx, cancel: cancel}
	wc := spawnrules.PoolConfig(cfg.Worker)
	wc.Agent = worker.AgentFunc(s.execute)
	wc.OnEvent = s.onEvent
	d, err := worker.New(wc)
	if err != nil {
		cancel()
		return nil, err
	}
	s.d = d
	return s, nil
}

// Dispatcher returns the Dispatcher the spawner owns (for its Stats,
// Items and Workers).
func (s *DispatcherSpawner) Dispatcher() *worker.Dispatcher { return s.d }

// Spawn implements Spawner.
func (s *DispatcherSpawner) Spawn(ctx context.Context, r SpawnRequest) error {
	s.mu.Lock()
	adm := s.spawns.Admit(r.Assignment, s.closed)
	s.mu.Unlock()
	switch adm {
	case spawnrules.Closed:
		return ErrSpawnerClosed
	case spawnrules.Known:
		return nil
	}
	dir, err := s.cfg.Workspace(r.Item)
	if err != nil {
		return err
	}
	task, session, err := agentTask(ctx, s.cfg.Prompt, s.cfg.Checkpoints, r)
	if err != nil {
		return err
	}
	s.mu.Lock()
	switch s.spawns.Admit(r.Assignment, s.closed) {
	case spawnrules.Closed:
		s.mu.Unlock()
		return ErrSpawnerClosed
	case spawnrules.Known:
		s.mu.Unlock()
		return nil
	}
	s.spawns.Add(r.Assignment, &dispatched{req: r, session: session})
	s.mu.Unlock()
	// Submit may assign at once, and the agent wrapper and the event hook
	// take s.mu: it is not held here.
	review := spawnrules.Review(s.cfg.Review != nil, func() bool { return s.cfg.RequireReview == nil || s.cfg.RequireReview(r) })
	err = s.d.Submit(ctx, spawnrules.Item(r.Assignment, r.Stage, task, dir, review))
	if err != nil && !errors.Is(err, worker.ErrItemActive) {
		s.mu.Lock()
		s.spawns.Forget(r.Assignment) // not submitted: a re-issued spawn tries again
		s.mu.Unlock()
		return err
	}
	return nil
}

// execute wraps Worker.Agent: it finds the assignment from the prompt's
// assignment block, adds the session to resume, the assignment's
// environment (AssignmentEnv) and the stage's timeout, lets a shutdown
// request cancel it, and keeps the agent's report for the completion.
func (s *DispatcherSpawner) execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := ParseAssignment(req.TaskPrompt)
	s.mu.Lock()
	e := s.spawns.Get(a.Assignment)
	if !ok || e == nil {
		s.mu.Unlock()
		return s.agent.Execute(ctx, req, onEvent) // not one of ours
	}
	if e.Shutdown() {
		s.mu.Unlock()
		return phases.AgentResult{}, context.Canceled
	}
	sp := e.P
	req.SessionID = sp.session
	req.Env = append(slices.Clip(req.Env), AssignmentEnv(sp.req)...)
	var cancel context.CancelFunc
	if t := s.cfg.Timeouts.For(sp.req.Stage); t > 0 {
		ctx, cancel = context.WithTimeout(ctx, t)
		if req.Timeout <= 0 || t < req.Timeout {
			req.Timeout = t
		}
	} else {
		ctx, cancel = context.WithCancel(ctx)
	}
	sp.cancel = cancel
	s.mu.Unlock()
	defer cancel()

	res, rep, err := execute(ctx, s.agent, sp.req.Item, req, onEvent)
	s.mu.Lock()
	sp.cancel = nil
	if rep.msg != nil {
		sp.report = rep
	}
	s.mu.Unlock()
	return res, err
}

// onEvent follows the Dispatcher: the end of an assignment (completed,
// parked, found closed) is the agent's report or EventIdle.
func (s *DispatcherSpawner) onEvent(ev worker.Event) {
	if s.hook != nil {
		s.hook(ev)
	}
	switch {
	case spawnrules.Ends(ev.Kind):
	case ev.Kind == worker.EventReviewRequested:
		if s.cfg.Review != nil {
			// The reviewer may take as long as an agent: not on the
			// Dispatcher's effect goroutine.
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.review(ev)
			}()
		}
		return
	case ev.Kind == worker.EventEscalated:
		if ev.Escalation != nil && ev.Escalation.Kind == worker.ReviewLimit {
			s.mu.Lock()
			if e := s.spawns.Get(foreman.AssignmentID(ev.Item)); e != nil {
				e.P.reviewLimit = ev.Escalation.Reason
			}
			s.mu.Unlock()
		}
		return
	default:
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Its end is taken once: only its id is kept from now on
	// (spawnrules.Table.End).
	e, deliver := s.spawns.End(foreman.AssignmentID(ev.Item), s.closed)
	if e != nil && spawnrules.Forgets(ev.Kind) {
		// Nobody submits it again (a retry is a new assignment): the
		// Dispatcher forgets it, and its prompt, too (s.mu before the
		// Dispatcher's lock, as Probe's pool view takes them).
		if err := s.d.Forget(ev.Item); err != nil {
			s.log.Warn("pipeline: forgetting a parked assignment", "assignment", ev.Item, "err", err)
		}
	}
	if !deliver {
		return
	}
	sp := e.P
	r, rep := sp.req, sp.report
	if ev.Kind == worker.EventParked && sp.reviewLimit != "" {
		rep = reviewLimitReport(r, sp.reviewLimit, sp.lastReview)
	}
	if rep.msg == nil {
		s.log.Info("pipeline: assignment ended without a report", "item", r.Item, "assignment", r.Assignment,
			"event", ev.Kind, "reason", ev.Reason)
	}
	// The hook runs on the Dispatcher's effect goroutine, and the Inbox
	// spawns through the Dispatcher: hand the report over from a goroutine.
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		report(s.ctx, s.cfg.Inbox, s.log, s.clk.Now(), r, rep)
	}()
}

// Send implements Messenger.
func (s *DispatcherSpawner) Send(_ context.Context, m Outgoing) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch m.Kind {
	case EffectShutdown:
		if e := s.spawns.Shut(m.Assignment); e != nil && e.P.cancel != nil {
			e.P.cancel()
		}
		if t := s.probes[m.Assignment]; t != nil {
			t.Stop()
			delete(s.probes, m.Assignment)
		}
	case EffectProbe:
		if s.closed {
			return ErrSpawnerClosed
		}
		switch s.spawns.Probe(m.Assignment, s.d.Item) {
		case spawnrules.StatusReply:
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.handle(m, EventStatusReply)
			}()
			return nil
		case spawnrules.TimeoutNow:
			// Nobody is working on it: waiting ProbeTimeout for an answer
			// would only delay the crash protocol.
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.handle(m, EventProbeTimeout)
			}()
			return nil
		}
		if t := s.probes[m.Assignment]; t != nil {
			t.Stop()
		}
		s.probes[m.Assignment] = s.clk.AfterFunc(s.cfg.ProbeTimeout, func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			if s.closed {
				return
			}
			delete(s.probes, m.Assignment)
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.handle(m, EventProbeTimeout)
			}()
		})
	}
	return nil
}

func (s *DispatcherSpawner) handle(m Outgoing, kind EventKind) {
	if _, err := s.cfg.Inbox.Handle(s.ctx, m.Item, Event{Kind: kind, Worker: m.Worker, Assignment: m.Assignment,
		Stage: m.Stage}); err != nil {
		s.log.Warn("pipeline: answering probe", "item", m.Item, "assignment", m.Assignment, "event", kind, "err", err)
	}
}

// Close stops the probe timers, closes the Dispatcher (killing running
// agents) and waits for the spawner's goroutines. It is safe to call twice.
func (s *DispatcherSpawner) Close() error {
	s.mu.Lock()
	s.closed = true
	for a, t := range s.probes {
		t.Stop()
		delete(s.probes, a)
	}
	s.mu.Unlock()
	s.cancel()
	err := s.d.Close()
	s.wg.Wait()
	return err
}
