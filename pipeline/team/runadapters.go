package team

import (
	"context"
	"errors"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// The adapters through which a Run's layers reach one another, apart from
// the Run itself (run.go): the task graph's Spawner (graphSpawner), the
// pipeline's Inbox for what the worker pool's agents report (inbox), and
// the pipeline's Spawner and Messenger over the current Run's worker pool
// (spawnProxy). While no Run is in progress, a spawn fails with
// errNotRunning and what the agents report goes to the pipeline directly.

// errNotRunning fails a spawn asked for while no Run is in progress; the
// effect stays pending and the next Run re-issues it.
var errNotRunning = errors.New("team: not running")

// graphSpawner is the task graph's Spawner: a spawned task is a story
// starting (or going on) in the pipeline.
type graphSpawner struct{ t *Team }

func (g graphSpawner) Spawn(ctx context.Context, req taskgraph.SpawnRequest) error {
	t := g.t
	rs := t.current()
	if rs == nil {
		return errNotRunning
	}
	effs, err := rs.co.Spawn(ctx, foreman.ItemID(req.Task), req.Assignment)
	if err != nil {
		return err
	}
	t.carry(rs, effs)
	return nil
}

// inbox receives what the worker pool's agents report (pipeline.Inbox).
type inbox struct{ t *Team }

func (in inbox) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (pipeline.State, error) {
	t := in.t
	if env.Body != nil {
		ev, _ := pipeline.EventOf(env)
		t.events.add(Event{Kind: EventStageFinished, At: t.clk.Now(), Story: item, Stage: env.Body.StageNum(),
			Role: t.role(env.Body.StageNum()), Worker: env.Sender, Assignment: env.Assignment, Outcome: ev.Outcome,
			Line: env.Raw, Detail: ev.Detail})
	}
	rs := t.current()
	if rs == nil {
		return t.pipe.Deliver(ctx, item, env)
	}
	st, effs, err := rs.co.Deliver(ctx, item, env)
	return st, t.settle(rs, effs, err)
}

func (in inbox) Handle(ctx context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, error) {
	t := in.t
	rs := t.current()
	if rs == nil {
		return t.pipe.Handle(ctx, item, ev)
	}
	st, effs, err := rs.co.Handle(ctx, item, ev)
	return st, t.settle(rs, effs, err)
}

// spawnProxy is the pipeline's Spawner and Messenger: it passes effects to
// the current Run's worker pool, and fails them while no Run is in
// progress (they stay pending until the next Run re-issues them).
type spawnProxy struct {
	t  *Team
	mu sync.Mutex
	s  *pipeline.DispatcherSpawner
	// items maps the assignments spawned to their stories, stages to
	// their stage.
	items  map[foreman.AssignmentID]foreman.ItemID
	stages map[foreman.AssignmentID]int
}

// stageOf returns the stage an assignment was spawned for.
func (p *spawnProxy) stageOf(a foreman.AssignmentID) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.stages[a]
}

func (p *spawnProxy) itemOf(a foreman.AssignmentID) (foreman.ItemID, bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	item, ok := p.items[a]
	return item, ok
}

func (p *spawnProxy) set(s *pipeline.DispatcherSpawner) {
	p.mu.Lock()
	p.s = s
	p.mu.Unlock()
}

func (p *spawnProxy) get() *pipeline.DispatcherSpawner {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.s
}

func (p *spawnProxy) Spawn(ctx context.Context, r pipeline.SpawnRequest) error {
	s := p.get()
	if s == nil {
		return errNotRunning
	}
	p.mu.Lock()
	if p.items == nil {
		p.items = map[foreman.AssignmentID]foreman.ItemID{}
		p.stages = map[foreman.AssignmentID]int{}
	}
	p.items[r.Assignment] = r.Item
	p.stages[r.Assignment] = r.Stage
	p.mu.Unlock()
	if err := s.Spawn(ctx, r); err != nil {
		return err
	}
	p.t.events.add(Event{Kind: EventStageStarted, At: p.t.clk.Now(), Story: r.Item, Stage: r.Stage, Role: p.t.role(r.Stage),
		Worker: r.Worker, Assignment: r.Assignment})
	return nil
}

func (p *spawnProxy) Send(ctx context.Context, m pipeline.Outgoing) error {
	s := p.get()
	if s == nil {
		if m.Kind == pipeline.EffectProbe {
			return errNotRunning
		}
		return nil // an ACK or a shutdown for a worker that is gone: harmless
	}
	return s.Send(ctx, m)
}
