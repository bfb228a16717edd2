package teamsim

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/internal/spawnrules"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
	"github.com/agentforeman/foreman/worker"
)

// coord is one coordinator process: the team's runtimes over the
// simulated store, the worker pool, and the team's own coordinator
// (teamcore.Coordinator), whose decisions it does not restate: it only
// carries out the effects the coordinator returns, as scheduled events.
type coord struct {
	w        *world
	inc      int
	pipe     *pipeline.Runtime
	graph    *taskgraph.Runtime
	pool     *worker.Dispatcher
	br       *bridge
	co       *teamcore.Coordinator
	finished bool
	// stopped: the Run finished and its process stopped.
	stopped bool
}

// boot starts a coordinator process on the world's store: the team's New
// and the start of its Run.
func (w *world) boot() *coord {
	w.inc++
	c := &coord{w: w, inc: w.inc}
	w.checks.spent = 0 // a new pool, with a budget of its own
	c.br = newBridge(c)
	var err error
	c.pipe, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Flow: w.cfg.Flow, Store: w.store, Spawner: c.br, Messenger: c.br, Worktrees: w.repo,
		Merger: teamcore.Triager{DB: w.store, Flow: laterFlow{c}, Git: w.repo, ReworkStage: w.reworkStage},
		Board:  teamcore.StoreBoard{DB: w.store}, Clock: w.clk,
	})
	if err == nil {
		c.graph, err = taskgraph.NewRuntime(taskgraph.Config{
			Store: w.store, Spawner: graphSpawner{c}, Clock: w.clk,
			Core: teamcore.GraphCore(w.cfg.Workers),
		})
	}
	if err == nil {
		c.pool, err = worker.New(w.poolConfig(c))
	}
	if err == nil && w.inc == 1 {
		err = c.plan(w.ctx)
	}
	if err != nil {
		w.violate("fault", "starting the coordinator: %v", err)
		c.finished = true
	}
	c.co = teamcore.New(teamcore.Config{Flow: c.pipe, Graph: c.graph, Stages: w.cfg.Flow, Spawner: c.br,
		Host: simHost{w}, Clock: w.clk})
	return c
}

// poolConfig is the worker pool's configuration: what a host gives the
// team as Config.Worker (its timing scaled so that a seed is a few
// thousand events, no rate-limit jitter: the pool draws it from a source
// of its own, which would break replay), through the team's own
// teamcore.PoolConfig, with the settings pipeline.DispatcherSpawner adds
// (a fresh worker per assignment; crashes and stalls are the flow's).
func (w *world) poolConfig(c *coord) worker.Config {
	wc := spawnrules.PoolConfig(teamcore.PoolConfig(worker.Config{
		HeartbeatInterval: heartbeatInterval, LivenessTimeout: livenessTimeout, ProbeTimeout: probeTimeout,
		ProgressTimeout: progressTimeout, RateLimitJitter: -1, TotalBudget: w.cfg.budget(),
	}, w.cfg.Workers))
	wc.AssignmentPrefix, wc.WorkerPrefix = fmt.Sprintf("p%d-", c.inc), fmt.Sprintf("w%d-", c.inc)
	wc.Transport, wc.OnEvent, wc.Clock = transport{c.br}, c.br.onPoolEvent, w.clk
	return wc
}

// plan writes the plan into the task graph (the team's Add).
func (c *coord) plan(ctx context.Context) error {
	specs := make([]taskgraph.TaskSpec, 0, len(c.w.order))
	for _, id := range c.w.order {
		specs = append(specs, teamcore.TaskSpec(id, "story "+string(id), c.w.stories[id].after))
	}
	_, err := c.graph.Create(ctx, teamcore.GraphSession, "foreman", "team", specs)
	return err
}

// begin is the team's Run after a (re)start: Coordinator.Recover.
func (c *coord) begin() {
	if c.finished {
		return
	}
	effs, err := c.co.Recover(c.w.ctx)
	c.settle("recovering", effs, err)
}

// fault ends the Run with a system fault, as the team's Run would end.
func (c *coord) fault(what string, err error) {
	c.w.violate("fault", "%s: %v", what, err)
	c.finished = true
}

// settle carries out a coordinator call's effects, or ends the Run on its
// fault.
func (c *coord) settle(what string, effs []teamcore.Effect, err error) {
	if err != nil {
		c.fault(what, err)
		return
	}
	c.carry(effs)
}

// carry schedules the coordinator's effects as the team's Run carries
// them out on goroutines of their own: each at a moment Config.Seed picks
// within a few seconds, so that wake-ups (and parking and reworks) arrive
// in any order, as the team's may.
func (c *coord) carry(effs []teamcore.Effect) {
	w := c.w
	for _, e := range effs {
		st := e.State
		switch e.Kind {
		case teamcore.EffectWake:
			wu := e.Wake
			w.schedule(w.effectDelay(), c.inc, "graph "+wakeLabel(wu), func() {
				done, err := c.co.Step(w.ctx, wu)
				if err != nil {
					c.fault("graph step", err)
					return
				}
				if done {
					c.finished = true
				}
			})
		case teamcore.EffectPark:
			w.schedule(w.effectDelay(), c.inc, "park "+string(st.Item), func() {
				effs, err := c.co.Park(w.ctx, e)
				c.settle("parking "+string(st.Item), effs, err)
			})
		case teamcore.EffectRework:
			w.schedule(w.effectDelay(), c.inc, "rework "+string(st.Item), func() {
				effs, err := c.co.Rework(w.ctx, e)
				c.settle("reworking "+string(st.Item), effs, err)
			})
		case teamcore.EffectMerged:
			w.tracef("merged %s (%s)", st.Item, st.Commit)
		case teamcore.EffectPaused:
			w.tracef("paused %s at stage %d", st.Item, st.Stage)
			w.person.paused(w, st)
		}
	}
}

// effectDelay is when an effect the team carries out on a goroutine of its
// own happens: within a few seconds, in an order Config.Seed picks.
func (w *world) effectDelay() time.Duration {
	return time.Duration(w.rng.Int64N(int64(5 * time.Second)))
}

func wakeLabel(wu taskgraph.WakeUp) string {
	if wu.Task != "" {
		return fmt.Sprintf("%s %s %s", wu.Text, wu.Task, wu.Assignment)
	}
	return wu.Text
}

// laterFlow reads the coordinator's flow, which is made after its Merger.
type laterFlow struct{ c *coord }

func (f laterFlow) Get(ctx context.Context, item foreman.ItemID) (pipeline.State, error) {
	return f.c.pipe.Get(ctx, item)
}

// graphSpawner is the task graph's Spawner (the team's graphSpawner).
type graphSpawner struct{ c *coord }

func (g graphSpawner) Spawn(ctx context.Context, req taskgraph.SpawnRequest) error {
	g.c.w.crashPoint("graph spawn " + req.Task)
	effs, err := g.c.co.Spawn(ctx, foreman.ItemID(req.Task), req.Assignment)
	if err != nil {
		return err
	}
	g.c.carry(effs)
	return nil
}

// deliver hands the coordinator a worker's report (the team's
// inbox.Deliver).
func (c *coord) deliver(item foreman.ItemID, env message.Envelope) {
	_, effs, err := c.co.Deliver(c.w.ctx, item, env)
	c.settle(string(item), effs, err)
}

// handle hands the coordinator a worker event (idle, status reply, probe
// timeout): the team's inbox.Handle.
func (c *coord) handle(item foreman.ItemID, ev pipeline.Event) {
	_, effs, err := c.co.Handle(c.w.ctx, item, ev)
	c.settle(string(item), effs, err)
}
