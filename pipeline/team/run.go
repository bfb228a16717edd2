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
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
	"github.com/agentforeman/foreman/worker"
)

// runState is one Run's: its coordinator, the task graph's wake-ups, and
// how it ends.
type runState struct {
	ctx     context.Context
	co      *teamcore.Coordinator
	wakeups chan taskgraph.WakeUp
	wg      sync.WaitGroup

	// paced: the worker pool runs fewer agents because of rate limits.
	paced atomic.Bool

	mu       sync.Mutex
	fault    error
	done     chan struct{}
	doneOnce sync.Once
	cancel   context.CancelCauseFunc
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
	since, _ := startTicks(os.Getpid())
	lock, err := acquireRunLock(ctx, t.cfg.StateDir, runInfo{PID: os.Getpid(), Host: host, Workers: t.cfg.Workers, Started: time.Now(), Since: since})
	if err != nil {
		t.mu.Unlock()
		return Result{}, err
	}
	defer lock.release()
	if err := t.clearResults(); err != nil {
		t.mu.Unlock()
		return Result{}, err
	}
	if err := t.recordRunStart(ctx); err != nil {
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
	rs := &runState{ctx: runCtx, cancel: cancel, wakeups: make(chan taskgraph.WakeUp), done: make(chan struct{}),
		co: teamcore.New(teamcore.Config{Flow: t.pipe, Graph: t.graph, Stages: t.cfg.Flow, Spawner: &t.spawns,
			Host: coordHost{t}, Clock: t.clk, Log: t.log})}
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
	wc := teamcore.PoolConfig(t.cfg.Worker, t.cfg.Workers)
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
	effs, err := rs.co.Recover(ctx)
	if err != nil {
		graphDone <- nil
		stop()
		return err
	}
	t.watchLanding(rs)
	go func() { graphDone <- t.stepGraph(ctx, rs) }()
	t.carry(rs, effs)
	select {
	case <-rs.done:
	case <-ctx.Done():
	}
	return stop()
}

// stepGraph hands the task graph the Run's wake-ups, one step each, until
// the Run ends (the coordinator decides what a step means).
func (t *Team) stepGraph(ctx context.Context, rs *runState) error {
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case w := <-rs.wakeups:
			done, err := rs.co.Step(ctx, w)
			if err != nil {
				return err
			}
			if done {
				rs.finish()
			}
		}
	}
}

// carry carries out the coordinator's effects: wake-ups, parking and
// reworks on the Run's goroutines (the caller may be inside a graph step),
// events at once.
func (t *Team) carry(rs *runState, effs []teamcore.Effect) {
	for _, e := range effs {
		st := e.State
		switch e.Kind {
		case teamcore.EffectWake:
			rs.wake(e.Wake)
		case teamcore.EffectMerged:
			t.events.add(Event{Kind: EventStoryMerged, At: e.At, Story: st.Item, Stage: st.Stage, Commit: st.Commit, Started: st.Started})
		case teamcore.EffectPaused:
			t.events.add(Event{Kind: EventStoryPaused, At: e.At, Story: st.Item, Stage: st.Stage, Role: t.role(st.Stage),
				Escalation: st.Pause, Detail: pauseText(st), Started: st.Started})
		case teamcore.EffectPark, teamcore.EffectRework:
			rs.wg.Add(1)
			go func() {
				defer rs.wg.Done()
				do := rs.co.Park
				if e.Kind == teamcore.EffectRework {
					do = rs.co.Rework
				}
				more, err := do(rs.ctx, e)
				if err != nil {
					if rs.ctx.Err() == nil {
						rs.fail(err)
					}
					return
				}
				t.carry(rs, more)
			}()
		}
	}
}

// settle carries out the effects of a coordinator call, or ends the Run
// on its system fault.
func (t *Team) settle(rs *runState, effs []teamcore.Effect, err error) error {
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			rs.fail(err)
		}
		return err
	}
	t.carry(rs, effs)
	return nil
}

// current is the Run in progress, or nil.
func (t *Team) current() *runState {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.run
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

// Dispatcher exposes the worker pool of the Run in progress (nil when none
// is), for its Stats, Items and Workers.
func (t *Team) Dispatcher() *worker.Dispatcher {
	if s := t.spawns.get(); s != nil {
		return s.Dispatcher()
	}
	return nil
}
