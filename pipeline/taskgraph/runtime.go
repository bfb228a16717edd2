package taskgraph

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

// RecordKind is the store kind of session records; the record id is the
// session id.
const RecordKind = "taskgraph.session"

// DefaultMaxConflictRetries is how often a step is retried when another
// process changed the session between load and save.
const DefaultMaxConflictRetries = 5

// Config configures a Runtime. Zero values mean the documented defaults;
// Store and Spawner are required.
type Config struct {
	// Store holds the sessions and their tasks. Required.
	Store store.Store
	// Spawner starts the workers of spawned tasks. Required.
	Spawner Spawner
	// Reporter receives reports, logs and acks. Default: none (nil: they
	// are only logged).
	Reporter Reporter
	// Core configures roles, checkpoints and pipelines. Default: the
	// defaults CoreConfig documents.
	Core CoreConfig
	// Prompt builds a worker's prompt. Default: DefaultPrompt.
	Prompt func(SpawnRequest) string
	// Clock stamps wake-ups that carry no time. Default: the wall clock.
	Clock foreman.Clock
	// ResumeEvery makes Run wake itself with a "resume" at this interval
	// (to retry failed workers and notice lost callbacks). Default: 0
	// (never).
	ResumeEvery time.Duration
	// MaxConflictRetries is how often a step is retried when another
	// process changed the session between load and save. Default: 5
	// (DefaultMaxConflictRetries).
	MaxConflictRetries int
	// Logger receives the Runtime's logs. Default: none (nil discards
	// them).
	Logger *slog.Logger
	// OnChange, if not nil, sees the tasks each write of this Runtime
	// changed (a status, an assignment, a new task), once the write is
	// stored, in creation order. It runs inside the step: it must return
	// quickly and must not call the Runtime. Writes by other Runtimes
	// (other processes) are not seen here. Default: none (nil: not
	// called).
	OnChange func(session string, tasks []Task)
}

// Errors of the runtime, matched with errors.Is.
var (
	ErrNoStore         = errors.New("taskgraph: Config.Store is required")
	ErrNoSpawner       = errors.New("taskgraph: Config.Spawner is required")
	ErrSessionNotFound = errors.New("taskgraph: session not found (create it again to re-initialize)")
	ErrSessionExists   = errors.New("taskgraph: session already exists")
)

// Runtime is the imperative shell around Core: it loads a session from the
// Store, lets the core handle one wake-up, saves the new session with its
// pending effects (persist before acting), and then carries the effects out,
// removing them from the session in one write once done. Every method is one
// such step, so a Runtime created per invocation over the same store is a
// coordinator that takes one step per invocation; Run is the long-running
// mode over the same steps. Safe for concurrent use; it owns no goroutines.
//
// A Runtime keeps the sessions it steps in memory, with the versions of
// their records: a step reads only the session record's version (and
// reads everything again when another writer changed it), changes the
// session in place (Core.Apply), and writes the session record and the
// records of the tasks it changed (TaskRecordKind). A step therefore
// costs what it touches, not the size of the graph.
type Runtime struct {
	cfg   Config
	core  *Core
	clock foreman.Clock
	log   *slog.Logger
	mu    sync.Mutex
	// cache holds the sessions as this runtime last read or wrote them
	// (guarded by mu).
	cache map[string]*cachedSession
}

// NewRuntime checks cfg and fills in its defaults.
func NewRuntime(cfg Config) (*Runtime, error) {
	if cfg.Store == nil {
		return nil, ErrNoStore
	}
	if cfg.Spawner == nil {
		return nil, ErrNoSpawner
	}
	if cfg.Prompt == nil {
		cfg.Prompt = DefaultPrompt
	}
	if cfg.MaxConflictRetries <= 0 {
		cfg.MaxConflictRetries = DefaultMaxConflictRetries
	}
	r := &Runtime{cfg: cfg, core: NewCore(cfg.Core), clock: cfg.Clock, log: cfg.Logger, cache: map[string]*cachedSession{}}
	if r.clock == nil {
		r.clock = foreman.RealClock()
	}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	return r, nil
}

// Core returns the runtime's core.
func (r *Runtime) Core() *Core { return r.core }

// Create dispatches a new session: its tasks (nil: the mode's pipeline)
// are validated and stored, all pending. Nothing is spawned until the
// first wake-up (normally a spawn-next).
func (r *Runtime) Create(ctx context.Context, id, team string, mode Mode, tasks []TaskSpec) (*Session, error) {
	s, err := r.core.NewSession(id, mode, tasks, r.clock.Now())
	if err != nil {
		return nil, err
	}
	s.Team = team
	r.mu.Lock()
	defer r.mu.Unlock()
	for i := range s.Graph.Len() {
		s.Graph.touch(i)
	}
	c := &cachedSession{s: s}
	if err := r.write(ctx, c); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil, fmt.Errorf("%w: %s", ErrSessionExists, id)
		}
		return nil, err
	}
	r.cache[id] = c
	return s.copy(), nil
}

// Load reads a session and its record version from the store. It reads
// every task: a step does not need it (see Runtime), a status report or a
// host looking at the whole graph does.
func (r *Runtime) Load(ctx context.Context, id string) (*Session, int64, error) {
	c, err := r.readSession(ctx, id)
	if err != nil {
		return nil, 0, err
	}
	c.s.Graph.touched = nil
	return c.s, c.ver, nil
}

// session returns the session as the store has it now, from the cache
// when the session record's version is the one this runtime last saw.
// r.mu must be held.
func (r *Runtime) session(ctx context.Context, id string) (*cachedSession, error) {
	if c := r.cache[id]; c != nil {
		rec, err := r.cfg.Store.Get(ctx, RecordKind, id)
		switch {
		case err == nil && rec.Version == c.ver:
			return c, nil
		case errors.Is(err, store.ErrNotFound):
			delete(r.cache, id)
			return nil, fmt.Errorf("%w: %s", ErrSessionNotFound, id)
		case err != nil:
			return nil, err
		}
	}
	c, err := r.readSession(ctx, id)
	if err != nil {
		delete(r.cache, id)
		return nil, err
	}
	r.cache[id] = c
	return c, nil
}

// save writes c (see write) and forgets it when the write fails.
func (r *Runtime) save(ctx context.Context, c *cachedSession) error {
	err := r.write(ctx, c)
	if err != nil {
		delete(r.cache, c.s.ID)
	}
	return err
}

// Step handles one wake-up: load, re-issue any effects a previous
// invocation left pending, handle, save, carry out the new effects. A
// wake-up without a time gets the clock's. The error is a system fault
// (store, spawner, context) or an input the core rejects (ErrInvalidWakeUp,
// a *TransitionError); stale and duplicate callbacks are not errors but
// the Result's Disposition.
func (r *Runtime) Step(ctx context.Context, id string, w WakeUp) (Result, error) {
	if w.At.IsZero() {
		w.At = r.clock.Now()
	}
	return r.transition(ctx, id, func(s *Session) (Result, error) { return r.core.Apply(s, w) })
}

// StepText routes a wake-up text (Route) and handles it.
func (r *Runtime) StepText(ctx context.Context, id, text string) (Result, error) {
	return r.Step(ctx, id, Route(text, r.core.roles))
}

// Update applies a TaskUpdate (a worker marking its task completed or
// failed, a person cancelling one) without advancing the pipeline.
func (r *Runtime) Update(ctx context.Context, id string, u TaskUpdate) (Result, error) {
	if u.At.IsZero() {
		u.At = r.clock.Now()
	}
	return r.transition(ctx, id, func(s *Session) (Result, error) { return r.core.ApplyUpdate(s, u) })
}

// AddTasks creates more tasks in a stored session.
func (r *Runtime) AddTasks(ctx context.Context, id string, specs ...TaskSpec) error {
	_, err := r.transition(ctx, id, func(s *Session) (Result, error) {
		n, err := r.core.AddTasks(s, specs...)
		if err != nil {
			return Result{}, err
		}
		*s = *n
		return Result{Handler: HandleUpdate, Outcome: StepUpdated, Changed: true}, nil
	})
	return err
}

// Status reports a stored session without changing it; another process
// may call it while a coordinator runs.
func (r *Runtime) Status(ctx context.Context, id string) (StatusReport, error) {
	s, _, err := r.Load(ctx, id)
	if err != nil {
		return StatusReport{}, err
	}
	return r.core.Status(s, r.clock.Now()), nil
}

// Recover carries out the effects a crashed invocation left pending.
// Every step does this first; Recover does only that.
func (r *Runtime) Recover(ctx context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.session(ctx, id)
	if err != nil {
		return err
	}
	return r.drain(ctx, c)
}

func (r *Runtime) transition(ctx context.Context, id string, fn func(*Session) (Result, error)) (Result, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for attempt := 0; ; attempt++ {
		if err := ctx.Err(); err != nil {
			return Result{}, err
		}
		c, err := r.session(ctx, id)
		if err != nil {
			return Result{}, err
		}
		if len(c.s.Pending) > 0 {
			if err := r.drain(ctx, c); err != nil {
				return Result{}, err
			}
			if c, err = r.session(ctx, id); err != nil {
				return Result{}, err
			}
		}
		// fn changes the cached session in place, or nothing on error.
		res, err := fn(c.s)
		if err != nil {
			return res, err
		}
		if !res.Changed {
			for _, e := range res.Effects {
				if err := r.execute(ctx, c.s, e); err != nil {
					return res, err
				}
			}
			return res, nil
		}
		err = r.save(ctx, c)
		if errors.Is(err, store.ErrConflict) && attempt < r.cfg.MaxConflictRetries {
			r.log.Debug("taskgraph: session changed concurrently; retrying", "session", id, "attempt", attempt+1)
			continue
		}
		if err != nil {
			return res, err
		}
		// The effects are the session's pending list's tail, which the
		// drain below replaces: the result keeps its own copy.
		res.Effects = slices.Clone(res.Effects)
		return res, r.drain(ctx, c)
	}
}

// drain carries out the session's pending effects in order and then
// records them done in one write, instead of one write each: a crash
// before that write re-issues them all, which their idempotency allows
// (spawns by assignment, reports and logs carry Effect.Key). It stops at
// the first failure, recording what was done before it and leaving the
// rest pending.
func (r *Runtime) drain(ctx context.Context, c *cachedSession) error {
	done := make(map[string]bool, len(c.s.Pending))
	var failed error
	for _, e := range c.s.Pending {
		if err := r.execute(ctx, c.s, e); err != nil {
			failed = fmt.Errorf("taskgraph: session %s: effect %s: %w", c.s.ID, e.Key(), err)
			break
		}
		done[e.Key()] = true
	}
	if len(done) > 0 {
		if err := r.markDone(ctx, c, done); err != nil {
			return errors.Join(failed, err)
		}
	}
	return failed
}

// markDone removes executed effects from the stored session, reading it
// again when another process changed it meanwhile.
func (r *Runtime) markDone(ctx context.Context, c *cachedSession, done map[string]bool) error {
	id := c.s.ID
	for attempt := 0; ; attempt++ {
		kept := make([]Effect, 0, len(c.s.Pending))
		for _, e := range c.s.Pending {
			if !done[e.Key()] {
				kept = append(kept, e)
			}
		}
		c.s.Pending = kept
		err := r.save(ctx, c)
		if err == nil {
			return nil
		}
		if !errors.Is(err, store.ErrConflict) || attempt >= r.cfg.MaxConflictRetries {
			return err
		}
		if c, err = r.session(ctx, id); err != nil {
			return err
		}
	}
}

func (r *Runtime) execute(ctx context.Context, s *Session, e Effect) error {
	switch e.Kind {
	case EffectSpawn:
		req := SpawnRequest{Session: s.ID, Team: s.Team, Task: e.Task, Role: e.Role, Assignment: e.Assignment}
		if t, ok := s.Graph.Task(e.Task); ok {
			req.Description = t.Description
		}
		req.Prompt = r.cfg.Prompt(req)
		r.log.Info("taskgraph: spawn", "session", s.ID, "task", e.Task, "role", e.Role, "assignment", e.Assignment)
		return r.cfg.Spawner.Spawn(ctx, req)
	case EffectLog:
		level := slog.LevelInfo
		if e.Note == NoteWorkerFailed || e.Note == NoteStale {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "taskgraph: "+e.Note.String(), "session", s.ID, "type", e.LogType(), "task", e.Task, "role", e.Role, "assignment", e.Assignment)
	default:
		r.log.Debug("taskgraph: "+e.Note.String(), "session", s.ID, "kind", e.Kind, "task", e.Task)
	}
	if r.cfg.Reporter != nil {
		return r.cfg.Reporter.Report(ctx, s.ID, e)
	}
	return nil
}

// isInputError tells a wake-up the core rejected from a system fault.
func isInputError(err error) bool {
	return errors.Is(err, ErrInvalidWakeUp) || errors.Is(err, ErrInvalidUpdate) ||
		errors.Is(err, ErrInvalidTransition) || errors.Is(err, ErrUnknownTask)
}

// Run is the long-running mode: it handles every wake-up from wakeups,
// one step each, over the same core and store as Step (a resume every
// ResumeEvery too, if set, except after a step found the pipeline
// complete), until ctx ends (returning ctx.Err()) or
// wakeups is closed (returning nil). A wake-up the core rejects is logged
// and skipped; a system fault stops Run and is returned. onResult, if not
// nil, sees the result of every step that succeeded.
func (r *Runtime) Run(ctx context.Context, id string, wakeups <-chan WakeUp, onResult func(Result)) error {
	var ticker foreman.Ticker
	var tick <-chan time.Time
	if r.cfg.ResumeEvery > 0 {
		ticker = r.clock.NewTicker(r.cfg.ResumeEvery)
		defer ticker.Stop()
		tick = ticker.C()
	}
	for {
		var w WakeUp
		select {
		case <-ctx.Done():
			return ctx.Err()
		case ww, ok := <-wakeups:
			if !ok {
				return nil
			}
			w = ww
		case at := <-tick:
			w = WakeUp{Handler: HandleResume, Text: "resume (periodic)", At: at}
		}
		res, err := r.Step(ctx, id, w)
		switch {
		case err == nil:
			// A completed pipeline needs no periodic resume until a step
			// (other than a check) finds it otherwise.
			switch {
			case ticker == nil || res.Outcome == StepReported:
			case res.Outcome == StepComplete:
				tick = nil
			default:
				tick = ticker.C()
			}
			if onResult != nil {
				onResult(res)
			}
		case isInputError(err):
			r.log.Warn("taskgraph: wake-up rejected", "session", id, "handler", w.Handler, "err", err)
		default:
			return err
		}
	}
}
