package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// role is the taskgraph role that owns every story.
const role = "executor"

// session is the taskgraph session's id.
const session = "quickstart"

// coordinator joins the two coordinators of the library: the task graph
// (seed 003) decides which stories are ready and spawns them, at most
// parallel at once (taskgraph.CoreConfig.MaxActive: the others wait,
// pending, as "Ready to spawn" in its report); each spawned story runs
// through the story flow (seed 000) on a pipeline.Runtime; when a story is
// DONE the graph hears its completion, and when it is PAUSED its task is
// parked, so that it and what depends on it wait for a person.
//
// It is the taskgraph's Spawner (a spawn starts the story at once) and the
// pipeline's Inbox (it passes every worker message to the Runtime and
// watches the state that comes back).
type coordinator struct {
	pipe    *pipeline.Runtime
	graph   *taskgraph.Runtime
	stories map[foreman.ItemID]*story
	log     *printer
	wakeups chan taskgraph.WakeUp
	// fail stops the run with a system fault.
	fail func(error)
	// finished is closed when the graph has nothing left to do.
	finished chan struct{}

	mu   sync.Mutex
	runs map[foreman.ItemID]*storyRun
	wg   sync.WaitGroup
	done sync.Once
}

// storyRun is what the coordinator knows of one spawned story.
type storyRun struct {
	assignment foreman.AssignmentID // the taskgraph's
	started    time.Time
	ended      time.Time
	final      pipeline.State
	terminal   bool
}

func newCoordinator(stories []*story, log *printer, fail func(error)) *coordinator {
	c := &coordinator{
		stories: map[foreman.ItemID]*story{}, log: log, fail: fail,
		wakeups: make(chan taskgraph.WakeUp, 4*len(stories)+4), finished: make(chan struct{}),
		runs: map[foreman.ItemID]*storyRun{},
	}
	for _, s := range stories {
		c.stories[s.ID] = s
	}
	return c
}

// Spawn implements taskgraph.Spawner: the story starts at once (the graph
// keeps to parallel stories in progress). Idempotent by assignment: the
// graph re-issues a spawn it did not record as done.
func (c *coordinator) Spawn(_ context.Context, req taskgraph.SpawnRequest) error {
	item := foreman.ItemID(req.Task)
	c.mu.Lock()
	defer c.mu.Unlock()
	if run := c.runs[item]; run != nil && run.assignment == req.Assignment {
		return nil
	}
	c.runs[item] = &storyRun{assignment: req.Assignment, started: time.Now()}
	c.wg.Add(1)
	go c.start(item)
	return nil
}

func (c *coordinator) start(item foreman.ItemID) {
	defer c.wg.Done()
	c.log.item(item, "start: %s", c.stories[item].Title)
	st, err := c.pipe.Start(context.Background(), item, c.stories[item].Title)
	if err != nil {
		c.fail(fmt.Errorf("starting %s: %w", item, err))
		return
	}
	c.observe(st)
}

// Deliver implements pipeline.Inbox.
func (c *coordinator) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (pipeline.State, error) {
	st, err := c.pipe.Deliver(ctx, item, env)
	return c.after(st, err)
}

// Handle implements pipeline.Inbox.
func (c *coordinator) Handle(ctx context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, error) {
	st, err := c.pipe.Handle(ctx, item, ev)
	return c.after(st, err)
}

func (c *coordinator) after(st pipeline.State, err error) (pipeline.State, error) {
	if err != nil {
		if !errors.Is(err, context.Canceled) {
			c.fail(fmt.Errorf("%s: %w", st.Item, err))
		}
		return st, err
	}
	c.observe(st)
	return st, nil
}

// observe watches an item's state for the end of its flow: DONE is a
// completion callback to the task graph; PAUSED parks its task (a parked
// task is never respawned and never unblocks its dependents), releases its
// worker and wakes the graph, which then starts what the freed slot allows
// or, when nothing can start without a person, reports the stall.
func (c *coordinator) observe(st pipeline.State) {
	if st.Status != pipeline.StatusDone && st.Status != pipeline.StatusPaused {
		return
	}
	c.mu.Lock()
	run := c.runs[st.Item]
	if run == nil || run.terminal {
		c.mu.Unlock()
		return
	}
	run.terminal, run.final, run.ended = true, st, time.Now()
	c.mu.Unlock()

	if st.Status == pipeline.StatusDone {
		c.log.item(st.Item, "DONE: squash-merged to main as %s", short(st.Commit))
		c.wakeups <- taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: role, Assignment: run.assignment,
			Task: string(st.Item), Outcome: taskgraph.OutcomeCompleted, Text: fmt.Sprintf("[%s] %s completed", role, st.Item)}
		return
	}
	msg := "PAUSED"
	if p := st.Pause; p != nil {
		msg = fmt.Sprintf("PAUSED (%s): %s", p.Reason, p.Message)
	}
	c.log.item(st.Item, "%s", msg)
	if _, err := c.graph.Update(context.Background(), session, taskgraph.TaskUpdate{
		Task: string(st.Item), To: taskgraph.Parked, Assignment: run.assignment, At: time.Now(),
	}); err != nil {
		c.fail(fmt.Errorf("parking %s in the task graph: %w", st.Item, err))
		return
	}
	// The callback lets the parked task's worker go (parking wins over the
	// outcome it reports); the spawn-next after it fills the freed slot.
	c.wakeups <- taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: role, Assignment: run.assignment,
		Task: string(st.Item), Outcome: taskgraph.OutcomeFailed, Text: fmt.Sprintf("[%s] %s paused", role, st.Item)}
	c.wakeups <- taskgraph.WakeUp{Text: "next"}
}

// onResult sees every step of the task graph: it prints the status report
// when the graph changed and notices the end: everything merged, or a
// stall (nothing running and nothing ready: a parked story, and what
// depends on it, wait for a person, so the run is over).
func (c *coordinator) onResult(ctx context.Context) func(taskgraph.Result) {
	return func(r taskgraph.Result) {
		if len(r.Spawned) > 0 || len(r.Completed) > 0 || r.Outcome == taskgraph.StepComplete || r.Outcome == taskgraph.StepStalled {
			if rep, err := c.graph.Status(ctx, session); err == nil {
				c.log.block(rep.Text())
			}
		}
		if r.Outcome == taskgraph.StepComplete || r.Outcome == taskgraph.StepStalled {
			c.done.Do(func() { close(c.finished) })
		}
	}
}

// snapshot returns what happened to every spawned story.
func (c *coordinator) snapshot() map[foreman.ItemID]storyRun {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := make(map[foreman.ItemID]storyRun, len(c.runs))
	for id, r := range c.runs {
		out[id] = *r
	}
	return out
}
