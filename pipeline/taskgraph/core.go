package taskgraph

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"time"

	foreman "github.com/agentforeman/foreman"
)

// CoreConfig configures the pure core. Zero values mean the defaults.
type CoreConfig struct {
	// Roles are the known worker roles. NewCore keeps its own copy.
	// Default: DefaultRoles().
	Roles []string
	// Checkpoints pause the pipeline for review. NewCore keeps its own
	// copy. Default: DefaultCheckpoints().
	Checkpoints []Checkpoint
	// NoCheckpoints disables every checkpoint, Checkpoints' included.
	// Default: false.
	NoCheckpoints bool
	// Pipelines gives each mode its task chain: what NewSession creates
	// when given no tasks, and what the completeness check expects; a mode
	// it does not know expects nothing. Default: PipelineTasks.
	Pipelines func(Mode) ([]TaskSpec, bool)
	// MaxActive caps the tasks in progress at once: spawn-next spawns
	// ready tasks, in creation order, only while fewer than MaxActive are
	// in progress, and leaves the rest pending (Result.Held, "Ready to
	// spawn" in the report) for the spawn-next after a completion.
	// Default: 0 (or less: no limit, every ready task is spawned).
	MaxActive int
}

// Core is the coordinator's deterministic core: (session, wake-up) →
// (session', effects). It does no I/O and reads no clock; it never
// changes the session it is given. Safe for concurrent use.
type Core struct {
	roles       []string
	checkpoints []Checkpoint
	pipelines   func(Mode) ([]TaskSpec, bool)
	expected    map[Mode][]string
	maxActive   int
}

// NewCore returns a core with cfg's defaults filled in.
func NewCore(cfg CoreConfig) *Core {
	// Copies: a caller changing its slices afterwards changes no Core.
	c := &Core{roles: slices.Clone(cfg.Roles), checkpoints: cloneCheckpoints(cfg.Checkpoints), pipelines: cfg.Pipelines, expected: map[Mode][]string{}, maxActive: max(cfg.MaxActive, 0)}
	if c.roles == nil {
		c.roles = DefaultRoles()
	}
	if c.checkpoints == nil {
		c.checkpoints = DefaultCheckpoints()
	}
	if cfg.NoCheckpoints {
		c.checkpoints = nil
	}
	if c.pipelines == nil {
		c.pipelines = PipelineTasks
	}
	for _, m := range []Mode{ModeSpecOnly, ModeImplOnly, ModeFEOnly, ModeFullstack, ModeFullLifecycle, ModeFullLifecycleFE} {
		c.expected[m] = c.expectedFor(m)
	}
	return c
}

// MaxActive returns the limit of tasks in progress at once; 0 means none.
func (c *Core) MaxActive() int { return c.maxActive }

// Roles returns the known roles.
func (c *Core) Roles() []string { return slices.Clone(c.roles) }

func (c *Core) expectedFor(m Mode) []string {
	if e, ok := c.expected[m]; ok {
		return e
	}
	specs, _ := c.pipelines(m)
	subjects := make([]string, len(specs))
	for i, s := range specs {
		subjects[i] = s.Subject
	}
	return subjects
}

// Errors of the core's inputs, matched with errors.Is.
var (
	ErrUnknownMode   = errors.New("taskgraph: mode has no pipeline; give the tasks")
	ErrUnknownTask   = errors.New("taskgraph: unknown task")
	ErrInvalidWakeUp = errors.New("taskgraph: invalid wake-up")
	ErrInvalidUpdate = errors.New("taskgraph: invalid task update")
)

// NewSession creates a session (dispatches a pipeline): tasks validated as
// a Graph (nil tasks: the mode's pipeline), every task pending, status
// active. id is validated like an ItemID.
func (c *Core) NewSession(id string, mode Mode, tasks []TaskSpec, at time.Time) (*Session, error) {
	if err := foreman.ItemID(id).Validate(); err != nil {
		return nil, err
	}
	if tasks == nil {
		var ok bool
		if tasks, ok = c.pipelines(mode); !ok {
			return nil, fmt.Errorf("%w: %q", ErrUnknownMode, mode)
		}
	}
	g, err := NewGraph(c.roles, tasks...)
	if err != nil {
		return nil, err
	}
	return &Session{ID: id, Mode: mode, Status: SessionActive, CreatedAt: at, Graph: g}, nil
}

// AddTasks creates more tasks in a session (for example a fix round),
// validated against the existing ones. A completed session becomes active
// again when given new work.
func (c *Core) AddTasks(s *Session, specs ...TaskSpec) (*Session, error) {
	g, err := s.Graph.Add(c.roles, specs...)
	if err != nil {
		return nil, err
	}
	n := s.clone()
	n.Graph = g
	if n.Status == SessionCompleted && len(specs) > 0 {
		n.Status, n.CompletedAt = SessionActive, time.Time{}
	}
	// The new tasks, and any change not saved yet, are the runtime's to
	// write.
	g.touched = slices.Clone(s.Graph.touched)
	for i := s.Graph.Len(); i < g.Len(); i++ {
		g.touch(i)
	}
	return n, nil
}

// MaxHeldListed is how many of the ready tasks a spawn-next holds back
// (CoreConfig.MaxActive) Result.Held and the reports name; the others are
// counted.
const MaxHeldListed = 20

// Disposition is what the core did with a callback or task update.
type Disposition uint8

const (
	// Applied: taken into account.
	Applied Disposition = iota
	// Stale: from an assignment that is not current; ignored, counted.
	Stale
	// Duplicate: a completion already processed; acknowledged again,
	// counted, not reprocessed.
	Duplicate
)

func (d Disposition) String() string {
	return [...]string{"applied", "stale", "duplicate"}[d]
}

// StepOutcome is where a step left the pipeline.
type StepOutcome string

const (
	StepSpawned     StepOutcome = "spawned"      // ready tasks got workers
	StepWaiting     StepOutcome = "waiting"      // nothing ready, work in progress
	StepComplete    StepOutcome = "complete"     // PIPELINE_COMPLETE
	StepStalled     StepOutcome = "stalled"      // nothing ready or running, not complete
	StepPaused      StepOutcome = "paused"       // at a checkpoint
	StepProgress    StepOutcome = "progress"     // callback before completion
	StepAllRunning  StepOutcome = "all_running"  // resume found every worker running
	StepWorkerReset StepOutcome = "worker_reset" // a failed worker's task went back to pending
	StepIgnored     StepOutcome = "ignored"      // stale, duplicate, or nothing to do
	StepReported    StepOutcome = "reported"     // check
	StepUpdated     StepOutcome = "updated"      // a task update applied
)

// Result describes one step. Effects are also appended to the new
// session's Pending when Changed.
type Result struct {
	Handler     Handler
	Disposition Disposition
	Outcome     StepOutcome
	// Changed reports whether the session changed (and must be saved
	// before the effects are carried out).
	Changed bool
	// Completed lists the tasks whose completion this step processed,
	// Spawned the tasks given a worker, Reset the tasks put back to
	// pending.
	Completed []string
	Spawned   []string
	Reset     []string
	// Held lists the ready tasks left pending because CoreConfig.MaxActive
	// tasks are in progress: the first MaxHeldListed in creation order (a
	// step costs what it changes, not the size of the backlog);
	// HeldCount counts them all.
	Held      []string
	HeldCount int
	// Blocked and Missing explain a stall.
	Blocked []BlockedTask
	Missing []string
	// Violations are the failures, after the step, of the checks a step
	// can break (active_workers consistent, no orphans, completion);
	// Core.Validate runs the whole table, and missing tasks also show in
	// a stall.
	Violations []Violation
	Effects    []Effect
}

// step carries one transition's working state.
type step struct {
	c             *Core
	old           *Session
	s             *Session
	at            time.Time
	res           Result
	graphCopied   bool
	workersCopied bool
	// inPlace: st.s is the caller's session (Apply); seq0 is its
	// EffectSeq before the step, restored when nothing changes.
	inPlace bool
	seq0    int64
	// checkpointHit: this step paused the session, so spawnNext stays quiet.
	checkpointHit bool
	// spare holds the new session's graph header and a few active
	// workers, allocated with the session itself (see begin).
	spare *sessionBlock
	// This step's effects: the first len(buf) in buf (no allocation for
	// a typical step), the rest in more.
	n    int
	buf  [6]Effect
	more []Effect
}

// begin starts a step; st lives on the caller's stack. The new session
// is allocated together with room for its graph header and a few active
// workers, which most steps that change anything copy: one allocation
// instead of three.
func (c *Core) begin(st *step, s *Session, h Handler, at time.Time) {
	b := &sessionBlock{s: *s}
	b.s.ActiveWorkers = slices.Clip(s.ActiveWorkers)
	b.s.Pending = slices.Clip(s.Pending)
	*st = step{c: c, old: s, s: &b.s, at: at, res: Result{Handler: h}, spare: b}
}

// sessionBlock is a session copied by Handle and the parts of it a step
// copies on write.
type sessionBlock struct {
	s       Session
	g       Graph
	workers [4]ActiveWorker
}

// beginInPlace starts a step that changes s itself.
func (c *Core) beginInPlace(st *step, s *Session, h Handler, at time.Time) {
	*st = step{c: c, old: s, s: s, at: at, res: Result{Handler: h},
		inPlace: true, graphCopied: true, workersCopied: true, seq0: s.EffectSeq}
}

// graph returns the session's graph, copied on first use so the old
// session keeps its statuses.
func (st *step) graph() *Graph {
	if !st.graphCopied {
		old := st.s.Graph
		st.spare.g = Graph{specs: old.specs, state: slices.Clone(old.state), index: old.index, blockers: old.blockers}
		st.spare.g.cloneIndex(old)
		st.s.Graph = &st.spare.g
		st.graphCopied = true
	}
	return st.s.Graph
}

func (st *step) emit(e Effect) {
	st.s.EffectSeq++
	e.Seq = st.s.EffectSeq
	if st.n < len(st.buf) {
		st.buf[st.n] = e
		st.n++
		return
	}
	st.more = append(st.more, e)
}

func (st *step) report(e Effect) {
	e.Kind = EffectReport
	st.emit(e)
}

// finish validates, records pending effects and returns the step's result.
func (st *step) finish(changed bool) (*Session, Result, error) {
	st.res.Violations = st.c.validateState(st.s)
	if len(st.res.Violations) > 0 && st.res.Handler != HandleCheck {
		st.report(Effect{Note: NoteViolations, Details: &Details{Text: violationsText(st.res.Violations)}})
	}
	if !changed {
		// Read-only: nothing to persist; the effects are output only.
		st.res.Effects = append(slices.Clone(st.buf[:st.n]), st.more...)
		for i := range st.res.Effects {
			st.res.Effects[i].Seq = 0
		}
		if st.inPlace {
			st.s.EffectSeq = st.seq0
		}
		return st.old, st.res, nil
	}
	if st.inPlace {
		n := len(st.s.Pending)
		st.s.Pending = append(append(st.s.Pending, st.buf[:st.n]...), st.more...)
		st.res.Effects = st.s.Pending[n:len(st.s.Pending):len(st.s.Pending)]
		st.res.Changed = true
		return st.s, st.res, nil
	}
	// One allocation holds the pending effects; the result's effects are
	// its tail.
	n := len(st.old.Pending)
	pending := make([]Effect, n+st.n+len(st.more))
	copy(pending, st.old.Pending)
	copy(pending[copy(pending[n:], st.buf[:st.n])+n:], st.more)
	st.s.Pending = pending
	st.res.Effects = pending[n:len(pending):len(pending)]
	st.res.Changed = true
	return st.s, st.res, nil
}

// workers returns the new session's active workers, copied on first use
// (with room for a few spawns) so the old session keeps its own.
func (st *step) workers() []ActiveWorker {
	if !st.workersCopied {
		n := len(st.s.ActiveWorkers)
		var w []ActiveWorker
		if n+2 <= len(st.spare.workers) {
			w = st.spare.workers[:n:len(st.spare.workers)]
		} else {
			w = make([]ActiveWorker, n, n+4)
		}
		copy(w, st.s.ActiveWorkers)
		st.s.ActiveWorkers = w
		st.workersCopied = true
	}
	return st.s.ActiveWorkers
}

func (st *step) removeWorker(i int) {
	st.s.ActiveWorkers = slices.Delete(st.workers(), i, i+1)
}

func (st *step) addWorker(w ActiveWorker) {
	st.s.ActiveWorkers = append(st.workers(), w)
}

func (c *Core) checkpointFor(task string, mode Mode) (Checkpoint, bool) {
	for _, cp := range c.checkpoints {
		if cp.applies(task, mode) {
			return cp, true
		}
	}
	return Checkpoint{}, false
}

// Handle runs the handler a wake-up routes to and returns the new session
// (s itself when nothing changed), the step's result, and an error only
// for input that cannot be applied (an invalid wake-up, an invalid
// transition); s is never modified.
func (c *Core) Handle(s *Session, w WakeUp) (*Session, Result, error) {
	if s == nil || s.Graph == nil {
		return nil, Result{}, fmt.Errorf("%w: no session", ErrInvalidWakeUp)
	}
	var st step
	c.begin(&st, s, w.Handler, w.At)
	return st.dispatch(w)
}

// Apply is Handle for a caller that owns s and has no use for the state
// before the step (a long-running loop keeping its session in memory): it
// changes s in place instead of copying what changes, and appends the
// effects to s.Pending (Result.Effects is the tail of it). On error s is
// unchanged: every input is checked before the first change.
func (c *Core) Apply(s *Session, w WakeUp) (Result, error) {
	if s == nil || s.Graph == nil {
		return Result{}, fmt.Errorf("%w: no session", ErrInvalidWakeUp)
	}
	var st step
	c.beginInPlace(&st, s, w.Handler, w.At)
	_, res, err := st.dispatch(w)
	return res, err
}

func (st *step) dispatch(w WakeUp) (*Session, Result, error) {
	switch w.Handler {
	case HandleCallback:
		return st.handleCallback(w)
	case HandleCheck:
		st.handleCheck()
		return st.finish(false)
	case HandleResume:
		st.handleResume()
		return st.finish(true)
	case HandleSpawnNext:
		changed := st.handleSpawnNext()
		return st.finish(changed)
	}
	return nil, Result{}, fmt.Errorf("%w: unknown handler %d", ErrInvalidWakeUp, w.Handler)
}

// assignmentFor derives the next assignment id of a task: unique in the
// session because Seq only grows and is persisted.
func assignmentFor(subject string, seq int64) foreman.AssignmentID {
	return foreman.AssignmentID(subject + "." + strconv.FormatInt(seq, 10))
}
