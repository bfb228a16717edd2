package teamcore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/mutant"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/worker"
)

// The team's task graph layout: one session, one role for every story.
const (
	GraphSession = "team"
	StoryRole    = "story"
)

// Flow is the story flow's runtime the coordinator drives
// (*pipeline.Runtime).
type Flow interface {
	Get(ctx context.Context, item foreman.ItemID) (pipeline.State, error)
	Start(ctx context.Context, item foreman.ItemID, title string) (pipeline.State, error)
	Resolve(ctx context.Context, item foreman.ItemID, stage int, note string) (pipeline.State, error)
	Pending(ctx context.Context, item foreman.ItemID) ([]pipeline.Effect, error)
	Handle(ctx context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, error)
	Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (pipeline.State, error)
	Recover(ctx context.Context) error
}

// Graph is the task graph's runtime (*taskgraph.Runtime).
type Graph interface {
	Recover(ctx context.Context, id string) error
	Load(ctx context.Context, id string) (*taskgraph.Session, int64, error)
	Update(ctx context.Context, id string, u taskgraph.TaskUpdate) (taskgraph.Result, error)
	Step(ctx context.Context, id string, w taskgraph.WakeUp) (taskgraph.Result, error)
}

// Host is what the coordinator asks the team: the plan, a person's
// decisions, and conflict triage's records.
type Host interface {
	// Title is a story's title; an error for a story the plan does not
	// have.
	Title(item foreman.ItemID) (string, error)
	// Decision is a person's decision about a paused story (st), nil when
	// none was made.
	Decision(ctx context.Context, st pipeline.State) (*Decision, error)
	// DecisionTaken forgets a decision the flow acted on (a retry or a
	// resume), so that a later pause can be decided again.
	DecisionTaken(ctx context.Context, item foreman.ItemID) error
	// ReworkDue says whether a paused story goes back to its builder at
	// stage instead of waiting for a person (conflict triage: ReworkDue);
	// an error is logged, and the story waits for a person.
	ReworkDue(ctx context.Context, st pipeline.State) (stage int, due bool, err error)
	// GrantRework records that the paused story st goes back to its
	// builder at stage (once per pause) and returns the builder's note.
	GrantRework(ctx context.Context, st pipeline.State, stage int) (note string, err error)
}

// Config configures a Coordinator. Every field but Log is required.
type Config struct {
	Flow  Flow
	Graph Graph
	// Stages is the flow's definition (the stage names of a respawn).
	Stages *pipeline.Flow
	// Spawner gives a stage its worker again after a restart.
	Spawner pipeline.Spawner
	Host    Host
	Clock   foreman.Clock
	Log     *slog.Logger
}

// EffectKind is what a driver of the Coordinator carries out.
type EffectKind uint8

// The effects a Coordinator returns.
const (
	// EffectWake hands Wake to the task graph (Coordinator.Step), never
	// inside the call that returned it (that may run inside a graph
	// step); wake-ups may arrive in any order.
	EffectWake EffectKind = iota + 1
	// EffectPark parks the story's task: Coordinator.Park, later.
	EffectPark
	// EffectRework gives the paused story back to its builder:
	// Coordinator.Rework, later.
	EffectRework
	// EffectMerged and EffectPaused are to be recorded: the story (State)
	// merged, or paused and waits for a person.
	EffectMerged
	EffectPaused
)

func (k EffectKind) String() string {
	switch k {
	case EffectWake:
		return "wake"
	case EffectPark:
		return "park"
	case EffectRework:
		return "rework"
	case EffectMerged:
		return "merged"
	case EffectPaused:
		return "paused"
	}
	return "unknown"
}

// Effect is one thing a driver schedules.
type Effect struct {
	Kind  EffectKind
	Wake  taskgraph.WakeUp
	State pipeline.State
	// Assignment is the graph assignment an EffectPark parks.
	Assignment foreman.AssignmentID
	// Stage is the stage an EffectRework restarts at.
	Stage int
	At    time.Time
}

// Wake is the effect of a wake-up.
func Wake(w taskgraph.WakeUp) Effect { return Effect{Kind: EffectWake, Wake: w, At: w.At} }

// Next is the wake-up that lets the graph fill a free slot.
func Next() Effect { return Wake(taskgraph.WakeUp{Text: "next"}) }

// Coordinator is one Run's coordination of the layers: it owns the table
// of the stories' task assignments and decides what a graph spawn, a
// worker's report or event, a story's end and a restart mean, calling the
// layers and returning the effects that need scheduling. It starts no
// goroutine and reads no clock but Config.Clock; the team's Run and the
// simulator drive it. Safe for concurrent use.
type Coordinator struct {
	cfg Config

	mu    sync.Mutex
	tasks map[foreman.ItemID]*taskRun
}

// taskRun is a story's current task graph assignment in this Run.
type taskRun struct {
	assignment foreman.AssignmentID
	// terminal: the story's end (DONE, PAUSED) was passed to the graph.
	terminal bool
}

// New returns a Coordinator for one Run.
func New(cfg Config) *Coordinator {
	if cfg.Log == nil {
		cfg.Log = slog.New(slog.DiscardHandler)
	}
	return &Coordinator{cfg: cfg, tasks: map[foreman.ItemID]*taskRun{}}
}

// Recover brings the layers back in step at the start of a Run: the flow
// and the graph re-issue their pending effects, every story the graph has
// in progress is looked at again (Spawn), and decisions a person made
// that did not reach the graph are carried out; the graph is then woken.
func (c *Coordinator) Recover(ctx context.Context) ([]Effect, error) {
	if err := c.cfg.Flow.Recover(ctx); err != nil {
		return nil, err
	}
	if err := c.cfg.Graph.Recover(ctx, GraphSession); err != nil {
		return nil, err
	}
	sess, _, err := c.cfg.Graph.Load(ctx, GraphSession)
	if err != nil {
		return nil, err
	}
	var out []Effect
	for _, task := range sess.Graph.Tasks() {
		item := foreman.ItemID(task.Subject)
		switch task.Status {
		case taskgraph.InProgress:
			effs, err := c.Spawn(ctx, item, task.Assignment)
			if err != nil {
				return out, err
			}
			out = append(out, effs...)
		case taskgraph.Parked:
			if err := c.applyDecision(ctx, item); err != nil {
				return out, err
			}
		}
	}
	return append(out, Next()), nil
}

// Spawn makes the flow work on a story the graph has given an assignment
// (the graph's Spawner): a new story starts; a paused one with a person's
// retry or resume restarts at the decided stage; one the flow already
// works on (after a restart) gets its current stage's worker again or has
// its lost probe timed out; a finished one is reported back. Idempotent:
// the graph re-issues spawns it did not see done.
func (c *Coordinator) Spawn(ctx context.Context, item foreman.ItemID, assignment foreman.AssignmentID) ([]Effect, error) {
	c.mu.Lock()
	if tr := c.tasks[item]; tr == nil || tr.assignment != assignment {
		c.tasks[item] = &taskRun{assignment: assignment}
	}
	c.mu.Unlock()
	st, err := c.cfg.Flow.Get(ctx, item)
	if err != nil {
		return nil, err
	}
	var d *Decision
	if st.Status == pipeline.StatusPaused {
		if d, err = c.decision(ctx, st); err != nil {
			return nil, err
		}
	}
	switch SpawnMove(st, d != nil && d.Restarts()) {
	case MoveStart:
		var title string
		if title, err = c.cfg.Host.Title(item); err == nil {
			st, err = c.cfg.Flow.Start(ctx, item, title)
		}
	case MoveResolve:
		st, err = c.cfg.Flow.Resolve(ctx, item, d.Stage, d.Feedback)
		if err == nil {
			err = c.cfg.Host.DecisionTaken(ctx, item)
		}
	case MoveRespawn:
		err = c.respawn(ctx, st)
	case MoveProbeLost:
		st, err = c.probeLost(ctx, st)
	}
	if err != nil {
		return nil, err
	}
	return c.observe(ctx, st), nil
}

// respawn gives an active story's current stage its worker again, when
// nobody works on it: after a restart, the worker of the crashed host is
// gone (and its agent, if it outlived the host, is stopped by the lease
// reaper before the new one starts). A story with effects still pending
// is left to them.
func (c *Coordinator) respawn(ctx context.Context, st pipeline.State) error {
	pending, err := c.cfg.Flow.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return err
	}
	return c.cfg.Spawner.Spawn(ctx, pipeline.SpawnRequest{
		Item: st.Item, Title: st.Title, Stage: st.Stage, StageName: c.cfg.Stages.Stages[st.Stage].Name,
		Worker: st.Worker, Assignment: st.Assignment, Readiness: st.Readiness, Feedback: st.Feedback,
	})
}

// probeLost ends a probe the crashed process sent and could not hear
// answered: unless effects are pending (the probe itself, re-issued by
// Recover, gets its answer), the probe timed out, and the crash protocol
// goes on (a fresh worker, or a pause).
func (c *Coordinator) probeLost(ctx context.Context, st pipeline.State) (pipeline.State, error) {
	pending, err := c.cfg.Flow.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return st, err
	}
	return c.cfg.Flow.Handle(ctx, st.Item, pipeline.Event{Kind: pipeline.EventProbeTimeout, Worker: st.Worker,
		Assignment: st.Assignment, Stage: st.Stage})
}

// Deliver hands the flow a worker's report and observes the story.
func (c *Coordinator) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (pipeline.State, []Effect, error) {
	st, err := c.cfg.Flow.Deliver(ctx, item, env)
	return c.after(ctx, st, err)
}

// Handle hands the flow a worker's event (idle, a status reply, a probe
// timeout) and observes the story.
func (c *Coordinator) Handle(ctx context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, []Effect, error) {
	st, err := c.cfg.Flow.Handle(ctx, item, ev)
	return c.after(ctx, st, err)
}

// after observes the state a flow call left, or returns its error: a
// system fault that ends the Run (context.Canceled as is: the Run ends).
func (c *Coordinator) after(ctx context.Context, st pipeline.State, err error) (pipeline.State, []Effect, error) {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return st, nil, err
		}
		return st, nil, fmt.Errorf("%s: %w", st.Item, err)
	}
	return st, c.observe(ctx, st), nil
}

// observe watches a story's state for the end of its flow: DONE completes
// its task in the graph; PAUSED goes back to its builder when conflict
// triage says so, else parks the task (a parked task never unblocks its
// dependents) and lets the graph fill the freed slot.
func (c *Coordinator) observe(ctx context.Context, st pipeline.State) []Effect {
	move := GraphMoveFor(st)
	if move == GraphPark {
		stage, due, err := c.cfg.Host.ReworkDue(ctx, st)
		if err != nil {
			c.cfg.Log.Warn("team: reading a story's conflict triage", "story", st.Item, "err", err)
		}
		if due && err == nil {
			return []Effect{{Kind: EffectRework, State: st, Stage: stage, At: c.cfg.Clock.Now()}}
		}
		if mutant.Active(mutant.CompleteOnPause) {
			move = GraphComplete // the bug: dependents of a paused story start
		}
	}
	if move == GraphNothing {
		return nil
	}
	c.mu.Lock()
	tr := c.tasks[st.Item]
	if tr == nil || tr.terminal {
		c.mu.Unlock()
		return nil
	}
	tr.terminal = true
	a := tr.assignment
	c.mu.Unlock()

	now := c.cfg.Clock.Now()
	if move == GraphComplete {
		return []Effect{{Kind: EffectMerged, State: st, At: now},
			Wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: StoryRole, Assignment: a, Task: string(st.Item),
				Outcome: taskgraph.OutcomeCompleted, Text: fmt.Sprintf("[%s] %s completed", StoryRole, st.Item), At: now})}
	}
	return []Effect{{Kind: EffectPaused, State: st, At: now}, {Kind: EffectPark, State: st, Assignment: a, At: now}}
}

// Park carries out an EffectPark: the story's task is parked in the
// graph, then a callback releases its worker slot (parking wins over the
// outcome it reports) and a wake-up after it fills the slot. A person
// may have decided about the pause before the task was parked (the pause
// was recorded, and seen, first): that decision, which found nothing
// parked to act on, is carried out now.
func (c *Coordinator) Park(ctx context.Context, e Effect) ([]Effect, error) {
	item := e.State.Item
	if _, err := c.cfg.Graph.Update(ctx, GraphSession, taskgraph.TaskUpdate{Task: string(item), To: taskgraph.Parked,
		Assignment: e.Assignment, At: e.At}); err != nil {
		return nil, fmt.Errorf("parking %s in the task graph: %w", item, err)
	}
	if err := c.applyDecision(ctx, item); err != nil {
		return nil, fmt.Errorf("carrying out a decision about %s: %w", item, err)
	}
	return []Effect{Wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: StoryRole, Assignment: e.Assignment,
		Task: string(item), Outcome: taskgraph.OutcomeFailed, Text: fmt.Sprintf("[%s] %s paused", StoryRole, item), At: e.At}),
		Next()}, nil
}

// Rework carries out an EffectRework: the rework is granted (once for the
// pause) and the flow resumes at the build stage with a fresh builder.
func (c *Coordinator) Rework(ctx context.Context, e Effect) ([]Effect, error) {
	st := e.State
	note, err := c.cfg.Host.GrantRework(ctx, st, e.Stage)
	if err != nil {
		return nil, fmt.Errorf("giving %s back to its builder after a conflict: %w", st.Item, err)
	}
	next, err := c.cfg.Flow.Resolve(ctx, st.Item, e.Stage, note)
	if errors.Is(err, pipeline.ErrInvalidTransition) {
		return nil, nil // resumed already (a second look at the same pause)
	}
	_, effs, err := c.after(ctx, next, err)
	return effs, err
}

// Step hands the task graph one wake-up. done reports the end of the
// Run: every story finished, or nothing running and nothing that can
// start. A wake-up the graph rejects (a stale callback) is logged and
// skipped; any other error is a system fault.
func (c *Coordinator) Step(ctx context.Context, w taskgraph.WakeUp) (done bool, err error) {
	res, err := c.cfg.Graph.Step(ctx, GraphSession, w)
	switch {
	case err == nil:
		return res.Outcome == taskgraph.StepComplete || res.Outcome == taskgraph.StepStalled, nil
	case RejectedWakeUp(err):
		c.cfg.Log.Warn("team: wake-up rejected", "wakeup", w.Text, "err", err)
		return false, nil
	}
	return false, err
}

// RejectedWakeUp reports whether the graph refused a wake-up as input
// (stale, unknown task, invalid transition) rather than failing.
func RejectedWakeUp(err error) bool {
	return errors.Is(err, taskgraph.ErrInvalidWakeUp) || errors.Is(err, taskgraph.ErrInvalidUpdate) ||
		errors.Is(err, taskgraph.ErrInvalidTransition) || errors.Is(err, taskgraph.ErrUnknownTask)
}

// Decided carries a person's decision about a paused story to the graph
// and wakes it (to start a released story).
func (c *Coordinator) Decided(ctx context.Context, item foreman.ItemID) ([]Effect, error) {
	if err := c.applyDecision(ctx, item); err != nil {
		return nil, err
	}
	return []Effect{Next()}, nil
}

func (c *Coordinator) applyDecision(ctx context.Context, item foreman.ItemID) error {
	st, err := c.cfg.Flow.Get(ctx, item)
	if err != nil {
		return err
	}
	d, err := c.decision(ctx, st)
	if err != nil || d == nil {
		return err
	}
	return ApplyDecision(ctx, c.cfg.Graph, item, *d)
}

// decision is a person's decision about the pause the story is in, nil
// when there is none. One about an earlier pause (a record a crash kept
// after the flow acted on it) is none, and is forgotten.
func (c *Coordinator) decision(ctx context.Context, st pipeline.State) (*Decision, error) {
	d, err := c.cfg.Host.Decision(ctx, st)
	switch {
	case err != nil || d == nil:
		return nil, err
	case !d.About(st):
		return nil, c.cfg.Host.DecisionTaken(ctx, st.Item)
	}
	return d, nil
}

// PoolConfig is the worker pool of a Run: the host's Config.Worker with
// the team's count of stories in flight as its size.
func PoolConfig(host worker.Config, workers int) worker.Config {
	host.MaxWorkers = workers
	return host
}
