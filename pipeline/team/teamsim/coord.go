package teamsim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
	"github.com/agentforeman/foreman/worker"
)

// The team's store layout, as pipeline/team keeps it.
const (
	graphSession = "team"
	storyRole    = "story"
	kindBoard    = "team.board"
)

// coord is one coordinator process: the team's runtimes over the
// simulated store, the worker pool, and what one Run of the team keeps in
// memory. It composes the same layers as pipeline/team's Run, one event
// at a time.
type coord struct {
	w     *world
	inc   int
	pipe  *pipeline.Runtime
	graph *taskgraph.Runtime
	pool  *worker.Dispatcher
	br    *bridge
	// tasks is the story's current task graph assignment, and whether its
	// end was passed to the graph (the team's runState.tasks).
	tasks    map[foreman.ItemID]*taskRun
	finished bool
}

type taskRun struct {
	assignment foreman.AssignmentID
	terminal   bool
}

// boot starts a coordinator process on the world's store: the team's New.
func (w *world) boot() *coord {
	w.inc++
	c := &coord{w: w, inc: w.inc, tasks: map[foreman.ItemID]*taskRun{}}
	w.checks.spent = 0 // a new pool, with a budget of its own
	c.br = newBridge(c)
	var err error
	c.pipe, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Flow: w.cfg.Flow, Store: w.store, Spawner: c.br, Messenger: c.br, Worktrees: w.repo, Merger: w.repo,
		Board: simBoard{w}, Clock: w.clk,
	})
	if err == nil {
		c.graph, err = taskgraph.NewRuntime(taskgraph.Config{
			Store: w.store, Spawner: graphSpawner{c}, Clock: w.clk,
			Core: taskgraph.CoreConfig{Roles: []string{storyRole}, NoCheckpoints: true, MaxActive: w.cfg.Workers},
		})
	}
	if err == nil {
		c.pool, err = worker.New(worker.Config{
			Mode: worker.ModeFresh, MaxWorkers: w.cfg.Workers, CrashBudget: -1, StallBudget: -1,
			HeartbeatInterval: heartbeatInterval, LivenessTimeout: livenessTimeout, ProbeTimeout: probeTimeout,
			ProgressTimeout: progressTimeout, SlowWorkerExtensions: -1, RateLimitJitter: -1,
			TotalBudget: poolBudget(w.cfg), AssignmentPrefix: fmt.Sprintf("p%d-", c.inc), WorkerPrefix: fmt.Sprintf("w%d-", c.inc),
			Transport: transport{c.br}, OnEvent: c.br.onPoolEvent, Clock: w.clk,
		})
	}
	if err == nil && w.inc == 1 {
		err = c.plan(w.ctx)
	}
	if err != nil {
		w.violate("fault", "starting the coordinator: %v", err)
		c.finished = true
	}
	return c
}

// plan writes the plan into the task graph (the team's Add).
func (c *coord) plan(ctx context.Context) error {
	specs := make([]taskgraph.TaskSpec, 0, len(c.w.order))
	for _, id := range c.w.order {
		spec := taskgraph.TaskSpec{Subject: string(id), Role: storyRole, Description: "story " + string(id)}
		for _, a := range c.w.stories[id].after {
			spec.BlockedBy = append(spec.BlockedBy, string(a))
		}
		specs = append(specs, spec)
	}
	_, err := c.graph.Create(ctx, graphSession, "foreman", "team", specs)
	return err
}

// begin is the team's Run after a (re)start: both runtimes re-issue their
// pending effects, every story in progress is looked at again, and the
// graph is woken.
func (c *coord) begin() {
	if c.finished {
		return
	}
	ctx := c.w.ctx
	if err := c.pipe.Recover(ctx); err != nil {
		c.fault("recovering the flows", err)
		return
	}
	if err := c.graph.Recover(ctx, graphSession); err != nil {
		c.fault("recovering the graph", err)
		return
	}
	sess, _, err := c.graph.Load(ctx, graphSession)
	if err != nil {
		c.fault("loading the graph", err)
		return
	}
	for _, task := range sess.Graph.Tasks() {
		if task.Status == taskgraph.InProgress {
			if err := c.spawnStory(ctx, foreman.ItemID(task.Subject), task.Assignment); err != nil {
				c.fault("respawning "+task.Subject, err)
				return
			}
		}
	}
	c.wake(taskgraph.WakeUp{Text: "next"})
}

// fault ends the Run with a system fault, as the team's Run would end.
func (c *coord) fault(what string, err error) {
	c.w.violate("fault", "%s: %v", what, err)
	c.finished = true
}

// wake hands the task graph a wake-up (the team's runState.wake).
func (c *coord) wake(wu taskgraph.WakeUp) {
	c.w.schedule(0, c.inc, "graph "+wakeLabel(wu), func() {
		res, err := c.graph.Step(c.w.ctx, graphSession, wu)
		if err != nil {
			c.fault("graph step", err)
			return
		}
		if res.Outcome == taskgraph.StepComplete || res.Outcome == taskgraph.StepStalled {
			c.finished = true
		}
	})
}

func wakeLabel(wu taskgraph.WakeUp) string {
	if wu.Task != "" {
		return fmt.Sprintf("%s %s %s", wu.Text, wu.Task, wu.Assignment)
	}
	return wu.Text
}

// graphSpawner is the task graph's Spawner (the team's graphSpawner).
type graphSpawner struct{ c *coord }

func (g graphSpawner) Spawn(ctx context.Context, req taskgraph.SpawnRequest) error {
	g.c.w.crashPoint("graph spawn " + req.Task)
	return g.c.spawnStory(ctx, foreman.ItemID(req.Task), req.Assignment)
}

// spawnStory is the team's spawnStory: what a graph spawn means for a
// story is teamcore.SpawnMove's decision.
func (c *coord) spawnStory(ctx context.Context, item foreman.ItemID, a foreman.AssignmentID) error {
	if tr := c.tasks[item]; tr == nil || tr.assignment != a {
		c.tasks[item] = &taskRun{assignment: a}
	}
	st, err := c.pipe.Get(ctx, item)
	if err != nil {
		return err
	}
	switch teamcore.SpawnMove(st, false) {
	case teamcore.MoveStart:
		st, err = c.pipe.Start(ctx, item, "story "+string(item))
	case teamcore.MoveRespawn:
		err = c.respawn(ctx, st)
	case teamcore.MoveProbeLost:
		st, err = c.probeLost(ctx, st)
	}
	if err != nil {
		return err
	}
	c.observe(st)
	return nil
}

// respawn is the team's respawn: an active story's current stage gets its
// worker again after a restart, unless effects are pending.
func (c *coord) respawn(ctx context.Context, st pipeline.State) error {
	pending, err := c.pipe.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return err
	}
	return c.br.Spawn(ctx, pipeline.SpawnRequest{
		Item: st.Item, Title: st.Title, Stage: st.Stage, StageName: c.w.cfg.Flow.Stages[st.Stage].Name,
		Worker: st.Worker, Assignment: st.Assignment, Readiness: st.Readiness, Feedback: st.Feedback,
	})
}

// probeLost is the team's probeLost: a probe the crashed process sent
// timed out.
func (c *coord) probeLost(ctx context.Context, st pipeline.State) (pipeline.State, error) {
	pending, err := c.pipe.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return st, err
	}
	return c.pipe.Handle(ctx, st.Item, pipeline.Event{Kind: pipeline.EventProbeTimeout, Worker: st.Worker,
		Assignment: st.Assignment, Stage: st.Stage})
}

// observe is the team's observe: DONE completes the story's task, PAUSED
// parks it (teamcore.GraphMoveFor decides which).
func (c *coord) observe(st pipeline.State) {
	move := teamcore.GraphMoveFor(st)
	if c.w.cfg.mutant == mutantCompleteOnPause && move == teamcore.GraphPark {
		move = teamcore.GraphComplete
	}
	if move == teamcore.GraphNothing {
		return
	}
	tr := c.tasks[st.Item]
	if tr == nil || tr.terminal {
		return
	}
	tr.terminal = true
	a, now := tr.assignment, c.w.now()
	if move == teamcore.GraphComplete {
		c.wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: storyRole, Assignment: a, Task: string(st.Item),
			Outcome: taskgraph.OutcomeCompleted, Text: fmt.Sprintf("[%s] %s completed", storyRole, st.Item), At: now})
		return
	}
	c.w.schedule(0, c.inc, "park "+string(st.Item), func() {
		if _, err := c.graph.Update(c.w.ctx, graphSession, taskgraph.TaskUpdate{Task: string(st.Item), To: taskgraph.Parked,
			Assignment: a, At: now}); err != nil {
			c.fault("parking "+string(st.Item), err)
			return
		}
		c.wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: storyRole, Assignment: a, Task: string(st.Item),
			Outcome: taskgraph.OutcomeFailed, Text: fmt.Sprintf("[%s] %s paused", storyRole, st.Item), At: now})
		c.wake(taskgraph.WakeUp{Text: "next"})
	})
}

// deliver hands the flow a worker's report (the team's inbox.Deliver).
func (c *coord) deliver(item foreman.ItemID, env message.Envelope) {
	if c.w.cfg.mutant == mutantFenceByName {
		// The bug: a report is taken as the current worker's when the
		// worker's name matches, whatever its assignment.
		if st, err := c.pipe.Get(c.w.ctx, item); err == nil && env.Sender == st.Worker {
			env.Assignment = st.Assignment
		}
	}
	st, err := c.pipe.Deliver(c.w.ctx, item, env)
	c.after(st, err)
}

// handle hands the flow a worker event (idle, status reply, probe timeout).
func (c *coord) handle(item foreman.ItemID, ev pipeline.Event) {
	st, err := c.pipe.Handle(c.w.ctx, item, ev)
	c.after(st, err)
}

func (c *coord) after(st pipeline.State, err error) {
	if err != nil {
		if errors.Is(err, context.Canceled) {
			return
		}
		c.fault(string(st.Item), err)
		return
	}
	c.observe(st)
}

// simBoard is the team's board: one record per story in the store.
type simBoard struct{ w *world }

func (b simBoard) get(ctx context.Context, item foreman.ItemID) (teamcore.Board, int64, error) {
	var r teamcore.Board
	rec, err := b.w.store.Get(ctx, kindBoard, string(item))
	if errors.Is(err, store.ErrNotFound) {
		return r, 0, nil
	}
	if err != nil {
		return r, 0, err
	}
	return r, rec.Version, json.Unmarshal(rec.Data, &r)
}

func (b simBoard) put(ctx context.Context, item foreman.ItemID, r teamcore.Board, ver int64) error {
	data, err := json.Marshal(r)
	if err != nil {
		return err
	}
	_, err = b.w.store.Apply(ctx, store.Op{Kind: kindBoard, ID: string(item), ExpectVersion: ver, Data: data})
	return err
}

func (b simBoard) Story(ctx context.Context, item foreman.ItemID) (pipeline.BoardStory, error) {
	r, ver, err := b.get(ctx, item)
	if err != nil || ver == 0 {
		return pipeline.BoardStory{}, err
	}
	return pipeline.BoardStory{Found: true, Status: r.Status, Tasks: r.Tasks}, nil
}

func (b simBoard) SetStatus(ctx context.Context, item foreman.ItemID, status string) error {
	r, ver, err := b.get(ctx, item)
	if err != nil {
		return err
	}
	r.Status = status
	return b.put(ctx, item, r, ver)
}

// verified records on the board what a stage's report claims, as the
// team's stage runner does once it has checked the evidence
// (teamcore.BoardAfter decides the entry).
func (b simBoard) verified(ctx context.Context, item foreman.ItemID, stage int, line string) error {
	cur, ver, err := b.get(ctx, item)
	if err != nil {
		return err
	}
	next, ok := teamcore.BoardAfter(b.w.cfg.Flow, stage, line, cur)
	if !ok {
		return nil
	}
	return b.put(ctx, item, next, ver)
}

// poolBudget is the pool's budget (none under the no-budget mutant, while
// the checks still hold the team to Config.TotalBudget).
func poolBudget(cfg Config) worker.Budget {
	if cfg.mutant == mutantNoBudget {
		return worker.Budget{}
	}
	return cfg.budget()
}
