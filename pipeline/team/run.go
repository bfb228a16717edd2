package team

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/worker"
)

// errNotRunning fails a spawn asked for while no Run is in progress; the
// effect stays pending and the next Run re-issues it.
var errNotRunning = errors.New("team: not running")

// runState is one Run's: the task graph's wake-ups, the stories it
// spawned, and how it ends.
type runState struct {
	ctx     context.Context
	wakeups chan taskgraph.WakeUp
	wg      sync.WaitGroup

	// paced: the worker pool runs fewer agents because of rate limits.
	paced atomic.Bool

	mu       sync.Mutex
	tasks    map[foreman.ItemID]*taskRun
	fault    error
	done     chan struct{}
	doneOnce sync.Once
	cancel   context.CancelCauseFunc
}

// taskRun is a story's current task graph assignment in this Run.
type taskRun struct {
	assignment foreman.AssignmentID
	// terminal: the story's end (DONE, PAUSED) was passed to the graph.
	terminal bool
}

// wake hands the task graph a wake-up without blocking the caller.
func (rs *runState) wake(w taskgraph.WakeUp) {
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		select {
		case rs.wakeups <- w:
		case <-rs.ctx.Done():
		}
	}()
}

// fail ends the Run with a system fault.
func (rs *runState) fail(err error) {
	rs.mu.Lock()
	if rs.fault == nil && !errors.Is(err, context.Canceled) {
		rs.fault = err
	}
	rs.mu.Unlock()
	rs.cancel(err)
}

func (rs *runState) finish() { rs.doneOnce.Do(func() { close(rs.done) }) }

// Run works through the plan: it starts every story whose dependencies
// have merged, at most Config.Workers at once, moves each through the flow
// on the worker pool, merges what passes, and returns when every story is
// merged or waits for a person (paused, skipped, abandoned, or blocked by
// one that is), or when ctx ends. The returned error is a system fault
// (store, git, context); stories that pause are part of the Result.
//
// One Run at a time coordinates a team: a second one, in this process or
// another, fails with ErrRunning or ErrBusy.
//
// Run is resumable: after a crash or a cancelled Run, calling Run again
// (in this process or a new one, with the same Config) carries out what
// was decided but not done, restarts the stages that were in flight, and
// goes on. Finished stages are not redone and a story is merged once.
func (t *Team) Run(ctx context.Context) (Result, error) {
	t.mu.Lock()
	switch {
	case t.closed:
		t.mu.Unlock()
		return Result{}, ErrClosed
	case t.run != nil:
		t.mu.Unlock()
		return Result{}, ErrRunning
	}
	host, _ := os.Hostname()
	lock, err := acquireRunLock(t.cfg.StateDir, runInfo{PID: os.Getpid(), Host: host, Workers: t.cfg.Workers, Started: time.Now()})
	if err != nil {
		t.mu.Unlock()
		return Result{}, err
	}
	defer lock.release()
	if err := t.clearResults(); err != nil {
		t.mu.Unlock()
		return Result{}, err
	}
	stopReports, err := t.startReports(ctx)
	if err != nil {
		t.mu.Unlock()
		return Result{}, err
	}
	defer stopReports()
	runCtx, cancel := context.WithCancelCause(ctx)
	rs := &runState{ctx: runCtx, cancel: cancel, wakeups: make(chan taskgraph.WakeUp),
		tasks: map[foreman.ItemID]*taskRun{}, done: make(chan struct{})}
	t.run = rs
	t.mu.Unlock()
	defer cancel(nil)

	t.events.add(Event{Kind: EventRunStarted, At: t.clk.Now()})
	t.reapStale(runCtx)
	err = t.runUntilDone(runCtx, rs)
	t.mu.Lock()
	t.run = nil
	t.mu.Unlock()
	if err == nil && ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	res, rerr := t.result(context.WithoutCancel(ctx))
	if err == nil {
		err = rerr
	}
	how := res.summary()
	if err != nil {
		how = "stopped: " + err.Error()
	}
	t.events.add(Event{Kind: EventRunFinished, At: t.clk.Now(), Detail: how})
	return res, err
}

func (t *Team) runUntilDone(ctx context.Context, rs *runState) error {
	wc := t.cfg.Worker
	wc.MaxWorkers = t.cfg.Workers
	wc.Agent = stageRunner{t}
	if t.cfg.Remote != nil {
		wc.Agent = t.cfg.Remote
	}
	wc.Clock, wc.Logger = t.cfg.Clock, t.log
	hostHook := wc.OnEvent
	wc.OnEvent = func(ev worker.Event) {
		if hostHook != nil {
			hostHook(ev)
		}
		t.onWorkerEvent(rs, ev)
	}
	dc := pipeline.DispatcherSpawnerConfig{Worker: wc, Workspace: t.mgr.Path, Prompt: t.prompt, Inbox: inbox{t}, Logger: t.log}
	if t.cfg.Reviewer != nil {
		dc.Review = t.review
		dc.RequireReview = func(r pipeline.SpawnRequest) bool { return t.cfg.Stages[r.Stage].Kind == StageBuild }
	}
	spawner, err := pipeline.NewDispatcherSpawner(dc)
	if err != nil {
		return err
	}
	t.spawns.set(spawner)
	graphDone := make(chan error, 1)
	stop := func() error {
		rs.cancel(context.Canceled)
		gerr := <-graphDone
		t.spawns.set(nil)
		cerr := spawner.Close()
		rs.wg.Wait()
		rs.mu.Lock()
		defer rs.mu.Unlock()
		switch {
		case rs.fault != nil:
			return rs.fault
		case gerr != nil && !errors.Is(gerr, context.Canceled):
			return gerr
		}
		return cerr
	}
	if err := t.recover(ctx, rs); err != nil {
		graphDone <- nil
		stop()
		return err
	}
	t.watchLanding(rs)
	go func() { graphDone <- t.graph.Run(ctx, graphSession, rs.wakeups, t.onGraphStep(rs)) }()
	rs.wake(taskgraph.WakeUp{Text: "next"})
	select {
	case <-rs.done:
	case <-ctx.Done():
	}
	return stop()
}

// recover brings the layers back in step after a restart: the pipeline
// and the graph re-issue their pending effects, then every story the graph
// has in progress is looked at again (see spawnStory), and decisions a
// person made that did not reach the graph are carried out.
func (t *Team) recover(ctx context.Context, rs *runState) error {
	if err := t.pipe.Recover(ctx); err != nil {
		return err
	}
	if err := t.graph.Recover(ctx, graphSession); err != nil {
		return err
	}
	sess, _, err := t.graph.Load(ctx, graphSession)
	if err != nil {
		return err
	}
	for _, task := range sess.Graph.Tasks() {
		item := foreman.ItemID(task.Subject)
		switch task.Status {
		case taskgraph.InProgress:
			if err := t.spawnStory(ctx, rs, item, task.Assignment); err != nil {
				return err
			}
		case taskgraph.Parked:
			if err := t.applyDecision(ctx, item); err != nil {
				return err
			}
		}
	}
	return nil
}

// onGraphStep sees every step of the task graph and notices the end:
// everything merged, or nothing running and nothing that can start.
func (t *Team) onGraphStep(rs *runState) func(taskgraph.Result) {
	return func(r taskgraph.Result) {
		if r.Outcome == taskgraph.StepComplete || r.Outcome == taskgraph.StepStalled {
			rs.finish()
		}
	}
}

// graphSpawner is the task graph's Spawner: a spawned task is a story
// starting (or going on) in the pipeline.
type graphSpawner struct{ t *Team }

func (g graphSpawner) Spawn(ctx context.Context, req taskgraph.SpawnRequest) error {
	t := g.t
	t.mu.Lock()
	rs := t.run
	t.mu.Unlock()
	if rs == nil {
		return errNotRunning
	}
	return t.spawnStory(ctx, rs, foreman.ItemID(req.Task), req.Assignment)
}

// spawnStory makes the pipeline work on a story the graph has given an
// assignment: a new story starts; a paused one with a person's retry or
// resume restarts at the decided stage; one the pipeline already works on
// (after a restart) gets its current stage's worker again; a finished one
// is reported back. Idempotent: the graph re-issues spawns it did not see
// done.
func (t *Team) spawnStory(ctx context.Context, rs *runState, item foreman.ItemID, assignment foreman.AssignmentID) error {
	rs.mu.Lock()
	if tr := rs.tasks[item]; tr == nil || tr.assignment != assignment {
		rs.tasks[item] = &taskRun{assignment: assignment}
	}
	rs.mu.Unlock()
	st, err := t.pipe.Get(ctx, item)
	if err != nil {
		return err
	}
	var d *decision
	if st.Status == pipeline.StatusPaused {
		if d, err = t.decisionOf(ctx, item); err != nil {
			return err
		}
	}
	switch spawnMove(st, d) {
	case moveStart:
		s, ok := t.story(item)
		if !ok {
			return fmt.Errorf("%w: %s", ErrUnknownStory, item)
		}
		st, err = t.pipe.Start(ctx, item, s.Title)
	case moveResolve:
		st, err = t.pipe.Resolve(ctx, item, d.Stage, resolveFeedback(d.Action, d.Note, st.Pause))
		if err == nil {
			err = t.clearDecision(ctx, item)
		}
	case moveRespawn:
		err = t.respawn(ctx, st)
	case moveProbeLost:
		st, err = t.probeLost(ctx, st)
	}
	if err != nil {
		return err
	}
	t.observe(rs, st)
	return nil
}

// respawn gives an active story's current stage its worker again, when
// nobody works on it: after a restart, the worker of the crashed host is
// gone (and its agent, if it outlived the host, is stopped by the lease
// reaper before the new one starts). A story in the middle of the crash
// protocol, or with effects still pending, is left to them.
func (t *Team) respawn(ctx context.Context, st pipeline.State) error {
	pending, err := t.pipe.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return err
	}
	return t.spawns.Spawn(ctx, pipeline.SpawnRequest{
		Item: st.Item, Title: st.Title, Stage: st.Stage, StageName: t.cfg.Flow.Stages[st.Stage].Name,
		Worker: st.Worker, Assignment: st.Assignment, Readiness: st.Readiness, Feedback: st.Feedback,
	})
}

// probeLost ends a probe the crashed process sent and could not hear
// answered: unless effects are pending (the probe itself, re-issued by
// Recover, gets its answer), the probe timed out, and the crash protocol
// goes on (a fresh worker, or a pause).
func (t *Team) probeLost(ctx context.Context, st pipeline.State) (pipeline.State, error) {
	pending, err := t.pipe.Pending(ctx, st.Item)
	if err != nil || len(pending) > 0 {
		return st, err
	}
	return t.pipe.Handle(ctx, st.Item, pipeline.Event{Kind: pipeline.EventProbeTimeout, Worker: st.Worker,
		Assignment: st.Assignment, Stage: st.Stage})
}

// observe watches a story's state for the end of its flow: DONE completes
// its task in the graph; PAUSED parks it (a parked task never unblocks its
// dependents) and lets the graph fill the freed slot. The graph is told
// from another goroutine: observe may run inside one of its steps.
func (t *Team) observe(rs *runState, st pipeline.State) {
	if t.takeBackConflict(rs, st) {
		return // conflict triage gives it back to its builder (triage.go)
	}
	move := graphMoveFor(st)
	if move == graphNothing {
		return
	}
	rs.mu.Lock()
	tr := rs.tasks[st.Item]
	if tr == nil || tr.terminal {
		rs.mu.Unlock()
		return
	}
	tr.terminal = true
	a := tr.assignment
	rs.mu.Unlock()

	now := t.clk.Now()
	if move == graphComplete {
		t.events.add(Event{Kind: EventStoryMerged, At: now, Story: st.Item, Stage: st.Stage, Commit: st.Commit, Started: st.Started})
		rs.wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: storyRole, Assignment: a, Task: string(st.Item),
			Outcome: taskgraph.OutcomeCompleted, Text: fmt.Sprintf("[%s] %s completed", storyRole, st.Item), At: now})
		return
	}
	t.events.add(Event{Kind: EventStoryPaused, At: now, Story: st.Item, Stage: st.Stage, Role: t.role(st.Stage),
		Escalation: st.Pause, Detail: pauseText(st), Started: st.Started})
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		if _, err := t.graph.Update(rs.ctx, graphSession, taskgraph.TaskUpdate{Task: string(st.Item), To: taskgraph.Parked,
			Assignment: a, At: now}); err != nil {
			rs.fail(fmt.Errorf("parking %s in the task graph: %w", st.Item, err))
			return
		}
		// The callback releases the parked task's worker slot (parking wins
		// over the outcome it reports); the wake-up after it fills the slot.
		rs.wake(taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: storyRole, Assignment: a, Task: string(st.Item),
			Outcome: taskgraph.OutcomeFailed, Text: fmt.Sprintf("[%s] %s paused", storyRole, st.Item), At: now})
		rs.wake(taskgraph.WakeUp{Text: "next"})
	}()
}

func pauseText(st pipeline.State) string {
	if st.Pause == nil {
		return "paused"
	}
	return fmt.Sprintf("%s: %s", st.Pause.Reason, st.Pause.Message)
}

// role is the host's word for a stage.
func (t *Team) role(stage int) string {
	if stage < 0 || stage >= len(t.cfg.Stages) {
		return ""
	}
	return t.cfg.Stages[stage].Role
}

// onWorkerEvent keeps what the worker pool says went wrong with a
// story's worker: as an EventWorker, and as the story's last worker cause,
// which a crash escalation then carries. It runs on the pool's effect
// goroutine, so the write is handed to the Run's goroutines.
func (t *Team) onWorkerEvent(rs *runState, ev worker.Event) {
	switch ev.Kind {
	case worker.EventRateLimited, worker.EventAssigned, worker.EventCompleted:
		t.paceForRateLimits(rs)
	case worker.EventUsage:
		t.onUsage(rs, ev)
		return
	}
	what := workerTrouble(ev)
	if what == "" {
		return
	}
	item, ok := t.spawns.itemOf(foreman.AssignmentID(ev.Item))
	if !ok {
		return
	}
	t.events.add(Event{Kind: EventWorker, At: ev.At, Story: item, Worker: ev.Worker, Assignment: foreman.AssignmentID(ev.Item), Detail: what})
	if ev.Kind == worker.EventParked || ev.Kind == worker.EventSlowWorker {
		// Parking follows the trouble that caused it, which is the cause
		// worth keeping; a slow worker is no trouble yet.
		return
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		if err := updateMemory(rs.ctx, t.db, item, func(m *memory) { m.WorkerCause = what }); err != nil {
			t.log.Warn("team: recording a worker's cause", "story", item, "err", err)
		}
	}()
}

// paceForRateLimits runs fewer agents at once while some are backing off
// from a provider's rate limit (one fewer per rate-limited stage, at least
// one), and all of them again once none is.
func (t *Team) paceForRateLimits(rs *runState) {
	d := t.Dispatcher()
	if d == nil {
		return
	}
	limited := d.RateLimited().Items
	if limited == 0 && !rs.paced.Load() {
		return
	}
	rs.wg.Add(1)
	go func() { // not on the pool's effect goroutine, which SetMaxActive waits for
		defer rs.wg.Done()
		n := paceFor(t.cfg.Workers, limited)
		if err := d.SetMaxActive(rs.ctx, n); err != nil {
			return
		}
		rs.paced.Store(n > 0)
		if n > 0 {
			t.log.Info("team: rate-limited; running fewer agents at once", "rate_limited", limited, "max_active", n)
		}
	}()
}

// workerTrouble says what a worker pool event means for the people
// watching, or "" for routine events.
func workerTrouble(ev worker.Event) string {
	var what string
	switch ev.Kind {
	case worker.EventWorkerStalled:
		what = "the worker made no progress and was stopped"
	case worker.EventWorkerDead:
		what = "the worker went silent and did not answer its probe"
	case worker.EventWorkerLost:
		what = "the worker could not be reached"
	case worker.EventFailed:
		what = "the worker's agent failed"
	case worker.EventParked:
		what = "the worker pool gave the assignment up"
	case worker.EventRateLimited:
		what = "the agent is rate-limited"
		if !ev.ResetsAt.IsZero() {
			what += " until " + ev.ResetsAt.UTC().Format(time.RFC3339)
		}
	case worker.EventWaitingForPerson:
		what = "the agent waits for a person"
	case worker.EventSlowWorker:
		what = "the worker is slow but shows work; it was given more time"
	default:
		return ""
	}
	if ev.Reason != "" {
		what += ": " + ev.Reason
	}
	if ev.Err != nil {
		what += ": " + ev.Err.Error()
	}
	if ev.Escalation != nil && ev.Escalation.Question != "" {
		what += ": " + ev.Escalation.Question
	}
	return what
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
	st, err := t.pipe.Deliver(ctx, item, env)
	return t.after(st, err)
}

func (in inbox) Handle(ctx context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, error) {
	st, err := in.t.pipe.Handle(ctx, item, ev)
	return in.t.after(st, err)
}

func (t *Team) after(st pipeline.State, err error) (pipeline.State, error) {
	t.mu.Lock()
	rs := t.run
	t.mu.Unlock()
	if rs == nil {
		return st, err
	}
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			rs.fail(fmt.Errorf("%s: %w", st.Item, err))
		}
		return st, err
	}
	t.observe(rs, st)
	return st, nil
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

// Dispatcher exposes the worker pool of the Run in progress (nil when none
// is), for its Stats, Items and Workers.
func (t *Team) Dispatcher() *worker.Dispatcher {
	if s := t.spawns.get(); s != nil {
		return s.Dispatcher()
	}
	return nil
}
