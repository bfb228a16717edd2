package teamsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/internal/spawnrules"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
	"github.com/agentforeman/foreman/worker"
)

// bridge joins the flow to the worker pool as pipeline.DispatcherSpawner
// does in the team, through the same decisions
// (pipeline/internal/spawnrules: what a spawn does, which pool events end
// an assignment and whether its end is reported, what a shutdown marks,
// how a probe is answered), with the simulated agents as the pool's
// Transport. The bridge only schedules: what the spawner does on its
// goroutines and timers happens here at simulated times.
type bridge struct {
	c      *coord
	spawns *spawnrules.Table[*dispatched]
	// probes are the pending probe timeouts, by the token that fires.
	probes map[foreman.AssignmentID]uint64
	token  uint64
}

// dispatched is what the bridge keeps about an assignment: its request
// and the report its agent ended with, and that report's line (the
// spawner's agentReport).
type dispatched struct {
	req  pipeline.SpawnRequest
	msg  message.Message
	line string
}

func newBridge(c *coord) *bridge {
	return &bridge{c: c, spawns: spawnrules.New[*dispatched](), probes: map[foreman.AssignmentID]uint64{}}
}

// Spawn implements pipeline.Spawner as DispatcherSpawner.Spawn does. A
// simulated coordinator is never closed: a crash drops its bridge.
func (b *bridge) Spawn(ctx context.Context, r pipeline.SpawnRequest) error {
	w := b.c.w
	w.crashPoint("spawn " + string(r.Assignment))
	if b.spawns.Admit(r.Assignment, false) != spawnrules.Submit {
		return nil
	}
	b.spawns.Add(r.Assignment, &dispatched{req: r})
	w.tracef("spawn %s %s stage %d", r.Item, r.Assignment, r.Stage)
	err := b.c.pool.Submit(ctx, spawnrules.Item(r.Assignment, r.Stage, pipeline.DefaultPrompt(r), "wt/"+string(r.Item),
		spawnrules.Review(false, nil)))
	if err != nil && !errors.Is(err, worker.ErrItemActive) {
		b.spawns.Forget(r.Assignment)
		return err
	}
	return nil
}

// Send implements pipeline.Messenger.
func (b *bridge) Send(_ context.Context, m pipeline.Outgoing) error {
	w := b.c.w
	w.crashPoint("send " + m.Kind.String() + " " + string(m.Assignment))
	switch m.Kind {
	case pipeline.EffectAck:
		w.checks.acked(m.Assignment, m.Stage)
	case pipeline.EffectShutdown:
		b.spawns.Shut(m.Assignment)
		w.agents.cancel(w, m.Assignment, b.c.inc)
		delete(b.probes, m.Assignment)
	case pipeline.EffectProbe:
		ev := pipeline.Event{Worker: m.Worker, Assignment: m.Assignment, Stage: m.Stage}
		switch b.spawns.Probe(m.Assignment, b.c.pool.Item) {
		case spawnrules.StatusReply:
			ev.Kind = pipeline.EventStatusReply
			b.c.w.schedule(w.delay(), b.c.inc, "status reply "+string(m.Assignment), func() { b.c.handle(m.Item, ev) })
		case spawnrules.TimeoutNow:
			ev.Kind = pipeline.EventProbeTimeout
			b.c.w.schedule(0, b.c.inc, "probe unanswered "+string(m.Assignment), func() { b.c.handle(m.Item, ev) })
		default:
			b.token++
			tok := b.token
			b.probes[m.Assignment] = tok
			ev.Kind = pipeline.EventProbeTimeout
			b.c.w.schedule(probeTimeout, b.c.inc, "probe timeout "+string(m.Assignment), func() {
				if b.probes[m.Assignment] == tok {
					delete(b.probes, m.Assignment)
					b.c.handle(m.Item, ev)
				}
			})
		}
	}
	return nil
}

// onPoolEvent follows the pool: an assignment's end is its report, or
// EventIdle when it has none (DispatcherSpawner.onEvent).
func (b *bridge) onPoolEvent(ev worker.Event) {
	if !spawnrules.Ends(ev.Kind) {
		return
	}
	w := b.c.w
	w.checks.poolEnded(ev.Assignment)
	e, deliver := b.spawns.End(foreman.AssignmentID(ev.Item), false)
	if e != nil && spawnrules.Forgets(ev.Kind) {
		if err := b.c.pool.Forget(ev.Item); err != nil {
			b.c.fault("forgetting a parked assignment", err)
			return
		}
	}
	if !deliver {
		return
	}
	r, msg, line := e.P.req, e.P.msg, e.P.line
	c := b.c
	w.schedule(w.delay(), c.inc, fmt.Sprintf("report %s %s %q", r.Item, r.Assignment, line), func() {
		c.report(r, msg, line)
	})
}

// report is pipeline's report (spawnrules.Envelope): the agent's report
// to the flow, or EventIdle. The team's stage runner records the board
// from the report it makes; the simulated agent's is recorded here.
func (c *coord) report(r pipeline.SpawnRequest, msg message.Message, line string) {
	env, ok, err := spawnrules.Envelope(r.Worker, r.Assignment, msg, line, c.w.now())
	if !ok {
		if err != nil {
			c.fault("wrapping the report of "+string(r.Assignment), err)
			return
		}
		c.handle(r.Item, pipeline.Event{Kind: pipeline.EventIdle, Worker: r.Worker, Assignment: r.Assignment})
		return
	}
	if v, ok := teamcore.ReportOfLine(r.Stage, line); ok {
		if err := (teamcore.StoreBoard{DB: c.w.store}).Verified(c.w.ctx, c.w.cfg.Flow, r.Item, v); err != nil {
			c.fault("recording the board of "+string(r.Item), err)
			return
		}
	}
	c.deliverChecked(r.Item, env)
}

// transport is the pool's worker.Transport: its commands reach the
// simulated agents.
type transport struct{ b *bridge }

func (t transport) Send(_ context.Context, cmd worker.Command) error {
	b := t.b
	w := b.c.w
	w.crashPoint("command " + cmd.Kind.String() + " " + string(cmd.Assignment))
	switch cmd.Kind {
	case worker.CommandAssign:
		w.agents.start(w, b.c, *cmd.Assign)
	case worker.CommandKill, worker.CommandReset, worker.CommandShutdown:
		w.agents.stop(cmd.Assignment)
	case worker.CommandProbe:
		if a := w.agents.byPool[cmd.Assignment]; a != nil && !a.dead && a.b.Fault != FaultHang {
			w.agents.send(w, a, worker.Message{Kind: worker.MsgStatus, Status: worker.StatusAlive})
		}
	}
	return nil
}

// agentTable is every simulated agent process.
type agentTable struct {
	byPool map[foreman.AssignmentID]*agent
	// live counts the running agents of each pipeline assignment.
	live map[foreman.AssignmentID]int
	list []*agent
	// silent are the agents that never progress, for the stall check.
	silent []*agent
}

// agent is one execution of one simulated agent.
type agent struct {
	pool foreman.AssignmentID // the pool's assignment
	a    worker.Assignment
	req  pipeline.SpawnRequest
	inc  int
	b    Behaviour
	dead bool
	// started is when its execution began.
	started time.Time
}

func (t *agentTable) init() {
	t.byPool = map[foreman.AssignmentID]*agent{}
	t.live = map[foreman.AssignmentID]int{}
}

func (t *agentTable) start(w *world, c *coord, as worker.Assignment) {
	e := c.br.spawns.Get(foreman.AssignmentID(as.Item))
	ag := &agent{pool: as.ID, a: as, inc: c.inc, started: w.now()}
	t.byPool[as.ID] = ag
	t.list = append(t.list, ag)
	if e == nil || e.Shutdown() {
		// Not one of ours, or stopped before it started: the execution
		// is cancelled at once.
		ag.b = Behaviour{Fault: FaultCrash}
		t.send(w, ag, worker.Message{Kind: worker.MsgFailed, Reason: "cancelled"})
		ag.dead = true
		return
	}
	sp := e.P
	ag.req = sp.req
	if b := w.cfg.budget(); b.Tokens > 0 && w.checks.spent > b.Tokens {
		w.violate(InvBudget, "an agent started for %s after its pool spent %d tokens of a budget of %d", sp.req.Assignment, w.checks.spent, b.Tokens)
	}
	ag.b = w.cfg.Agent(w.rng, w.cfg.Faults, Execution{Story: sp.req.Item, Stage: sp.req.Stage, Attempt: as.Attempt,
		Feedback: sp.req.Feedback, Resume: sp.req.Resume})
	t.live[ag.req.Assignment]++
	w.checks.agentStarted(w, ag)
	w.tracef("agent %s for %s (%s) %s", as.ID, ag.req.Assignment, ag.req.Item, ag.b.Fault)
	if ag.b.Fault == FaultHang {
		return
	}
	t.send(w, ag, worker.Message{Kind: worker.MsgStatus, Status: worker.StatusRunning})
	t.heartbeat(w, ag)
	if ag.b.Fault == FaultSilent {
		t.silent = append(t.silent, ag)
		return
	}
	w.schedule(ag.b.Duration, 0, "agent ends "+string(ag.pool), func() { t.finish(w, ag) })
}

func (t *agentTable) heartbeat(w *world, ag *agent) {
	w.schedule(heartbeatInterval, 0, "heartbeat "+string(ag.pool), func() {
		if ag.dead {
			return
		}
		t.send(w, ag, worker.Message{Kind: worker.MsgHeartbeat})
		t.heartbeat(w, ag)
	})
}

func (t *agentTable) finish(w *world, ag *agent) {
	if ag.dead {
		return
	}
	usage := worker.Usage{Tokens: ag.b.Tokens}
	switch ag.b.Fault {
	case FaultCrash:
		t.send(w, ag, worker.Message{Kind: worker.MsgFailed, Reason: "exit status 1", Usage: usage})
	case FaultRateLimit:
		t.send(w, ag, worker.Message{Kind: worker.MsgRateLimited, Reason: "429", ResetsAt: w.now().Add(5 * time.Minute), Usage: usage})
	default:
		if c := w.c; c.inc == ag.inc {
			if e := c.br.spawns.Get(ag.req.Assignment); e != nil {
				e.P.msg, e.P.line, _ = spawnrules.ReportOf(ag.req.Item, ag.b.Line)
			}
		}
		done := worker.Message{Kind: worker.MsgDone, Usage: usage}
		t.send(w, ag, done)
		if ag.b.ReportTwice {
			done.Usage = worker.Usage{}
			t.send(w, ag, done)
			t.resend(w, ag, w.delay()+time.Second)
		}
		if ag.b.LateReport {
			t.resend(w, ag, time.Duration(10+w.rng.IntN(50))*time.Minute)
		}
	}
	t.end(ag)
}

// resend delivers the agent's report to the flow once more after d: a
// duplicate, or by then a stale report of a replaced worker.
func (t *agentTable) resend(w *world, ag *agent, d time.Duration) {
	req, line := ag.req, ag.b.Line
	w.schedule(d, 0, fmt.Sprintf("report again %s %s", req.Item, req.Assignment), func() {
		env, perr := message.Open(req.Worker, req.Assignment, line, w.now())
		if perr != nil && env.Body != nil {
			return
		}
		w.c.deliverChecked(req.Item, env)
	})
}

// send carries a message from the agent to the pool that started it,
// with a delay Config.Seed decides, sometimes twice.
func (t *agentTable) send(w *world, ag *agent, m worker.Message) {
	m.Worker, m.Assignment = ag.a.Worker, ag.pool
	copies := 1
	if w.rng.Float64() < w.cfg.Faults.Duplicate {
		copies = 2
	}
	for i := range copies {
		d := w.delay()
		if i > 0 {
			d += time.Second
		}
		w.schedule(d, ag.inc, fmt.Sprintf("%s from %s", m.Kind, ag.pool), func() {
			w.c.deliverToPool(m)
		})
	}
}

// stop ends an agent's process (a kill, reset or shutdown from the pool).
func (t *agentTable) stop(pool foreman.AssignmentID) {
	if ag := t.byPool[pool]; ag != nil {
		t.end(ag)
	}
}

// cancel is a shutdown request from the flow: the running execution of
// assignment a is cancelled and reports its failure.
func (t *agentTable) cancel(w *world, a foreman.AssignmentID, inc int) {
	for _, ag := range t.list {
		if !ag.dead && ag.inc == inc && ag.req.Assignment == a {
			t.send(w, ag, worker.Message{Kind: worker.MsgFailed, Reason: "cancelled"})
			t.end(ag)
		}
	}
}

func (t *agentTable) end(ag *agent) {
	if ag.dead {
		return
	}
	ag.dead = true
	if ag.req.Assignment != "" {
		t.live[ag.req.Assignment]--
	}
}

// killAll stops every agent of a crashed coordinator (the lease reaper).
func (t *agentTable) killAll(inc int) {
	live := t.list[:0]
	for _, ag := range t.list {
		if ag.inc == inc {
			t.end(ag)
		}
		if !ag.dead {
			live = append(live, ag)
		}
	}
	t.list = live
}

// deliverToPool hands a worker message to the pool and checks that a
// message about an assignment the pool has finished changes nothing.
func (c *coord) deliverToPool(m worker.Message) {
	ended := c.w.checks.poolDone[m.Assignment]
	disp, err := c.pool.Deliver(c.w.ctx, m)
	if err != nil && disp != worker.Invalid {
		c.fault("delivering to the pool", err)
		return
	}
	if disp == worker.Applied {
		c.w.checks.spent += m.Usage.Tokens
	}
	if ended && disp == worker.Applied {
		c.w.violate("stale-no-change", "the pool applied %s of assignment %s after it had ended", m.Kind, m.Assignment)
	}
	if m.Kind == worker.MsgDone && disp == worker.Applied {
		if c.w.checks.doneApplied[m.Assignment] {
			c.w.violate("stale-no-change", "the pool applied a second DONE of %s", m.Assignment)
		}
		c.w.checks.doneApplied[m.Assignment] = true
	}
}
