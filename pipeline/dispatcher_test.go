package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
)

// stageAgents is the in-process agent of every stage: it reads who it is
// from the assignment block, does the stage's work (the board a real worker
// updates, a commit at Stage 2) and ends its plain-text output with the
// report line. The first Stage 3 fails when failQG is set; the first
// attempt at silentStage says nothing and waits to be killed.
type stageAgents struct {
	mgr         *merge.Manager
	board       *FileBoard
	failQG      bool
	silentStage int
	silent      chan struct{}

	mu      sync.Mutex
	workers []foreman.WorkerID
	runs    map[int]int
}

func (a *stageAgents) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	as, ok := ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, errors.New("no assignment block")
	}
	a.mu.Lock()
	a.workers = append(a.workers, as.Worker)
	if a.runs == nil {
		a.runs = map[int]int{}
	}
	a.runs[as.Stage]++
	n := a.runs[as.Stage]
	a.mu.Unlock()
	if as.Stage == a.silentStage && n == 1 {
		a.silent <- struct{}{}
		<-ctx.Done()
		return phases.AgentResult{}, ctx.Err()
	}
	o := Pass
	switch as.Stage {
	case 0:
		if err := a.board.Put(ctx, as.Item, BoardEntry{Status: "Backlog", Tasks: []string{"T1", "T2", "T3"}}); err != nil {
			return phases.AgentResult{}, err
		}
	case 1:
		if err := a.board.SetStatus(ctx, as.Item, BoardTodo); err != nil {
			return phases.AgentResult{}, err
		}
	case 2:
		name := filepath.Join(req.WorkspacePath, "feature-"+string(as.Assignment)+".txt")
		if err := os.WriteFile(name, []byte(as.Worker+"\n"), 0o644); err != nil {
			return phases.AgentResult{}, err
		}
		g := gitexec.Runner{Author: testIdentity, Committer: testIdentity}
		if _, err := g.Run(ctx, req.WorkspacePath, "add", "-A"); err != nil {
			return phases.AgentResult{}, err
		}
		if _, err := g.Run(ctx, req.WorkspacePath, "commit", "-q", "-m", "work of "+string(as.Worker)); err != nil {
			return phases.AgentResult{}, err
		}
		if err := a.board.SetStatus(ctx, as.Item, BoardToReview); err != nil {
			return phases.AgentResult{}, err
		}
	case 3:
		if a.failQG && n == 1 {
			o = Fail
		}
	}
	// A plain-text agent: no final message, the report ends the output.
	return phases.AgentResult{Success: true, Output: "working on it\n" + reportLine(as.Item, as.Stage, o) + "\n\n"}, nil
}

func (a *stageAgents) names() []foreman.WorkerID {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]foreman.WorkerID(nil), a.workers...)
}

// watchingInbox passes everything to the Runtime and tells the test every
// state that comes back.
type watchingInbox struct {
	lateInbox
	states chan State
}

func (w *watchingInbox) Handle(ctx context.Context, item foreman.ItemID, ev Event) (State, error) {
	st, err := w.lateInbox.Handle(ctx, item, ev)
	w.states <- st
	return st, err
}

func (w *watchingInbox) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (State, error) {
	st, err := w.lateInbox.Deliver(ctx, item, env)
	w.states <- st
	return st, err
}

// await reads states until one satisfies ok.
func (w *watchingInbox) await(t *testing.T, ctx context.Context, what string, ok func(State) bool) State {
	t.Helper()
	for {
		select {
		case st := <-w.states:
			if ok(st) {
				return st
			}
		case <-ctx.Done():
			t.Fatalf("waiting for %s: %v", what, ctx.Err())
		}
	}
}

type dispatchRig struct {
	*rig
	agents *stageAgents
	inbox  *watchingInbox
	ds     *DispatcherSpawner
	rt     *Runtime
}

func newDispatchRig(t *testing.T, agents *stageAgents, wc worker.Config) *dispatchRig {
	t.Helper()
	r := newRig(t)
	agents.mgr, agents.board = r.mgr, r.board
	inbox := &watchingInbox{states: make(chan State, 256)}
	wc.Agent, wc.Commits, wc.Clock = agents, worker.NoCommits, r.clk
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: wc, Inbox: inbox, Workspace: r.mgr.Path,
		ProbeTimeout: 30 * time.Second})
	require.NoError(t, err)
	t.Cleanup(func() { assert.NoError(t, ds.Close()) })
	rt, err := NewRuntime(RuntimeConfig{Store: store.NewMemory(store.MemoryOptions{}), Spawner: ds, Messenger: ds,
		Worktrees: Git{Manager: r.mgr}, Merger: Git{Manager: r.mgr}, Board: r.board, Reporter: r.rep, Clock: r.clk})
	require.NoError(t, err)
	inbox.set(rt)
	return &dispatchRig{rig: r, agents: agents, inbox: inbox, ds: ds, rt: rt}
}

func ended(st State) bool { return st.Status == StatusDone || st.Status == StatusPaused }

// TestDispatcherStory runs a whole story, a quality-gate rework included,
// through a real worker.Dispatcher and Runtime with in-process agents: each
// stage is one Dispatcher item named by the pipeline's assignment id, and
// each report reaches the pipeline from the agent's plain-text output.
func TestDispatcherStory(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	x := newDispatchRig(t, &stageAgents{failQG: true, silentStage: -1}, worker.Config{MaxWorkers: 2})
	_, err := x.rt.Start(ctx, item, "Login form")
	require.NoError(t, err)
	st := x.inbox.await(t, ctx, "the end of the story", ended)

	assert.Equal(t, StatusDone, st.Status, "%+v", st.Pause)
	assert.Equal(t, 1, trailerCommits(t, x.repo, item))
	assert.Equal(t, []foreman.WorkerID{"story-PROJ-42-s0", "story-PROJ-42-s1", "story-PROJ-42-s2", "story-PROJ-42-s3",
		"story-PROJ-42-s2-fix1", "story-PROJ-42-s3"}, x.agents.names())
	assert.Equal(t, int64(0), x.rt.Stats().Stale)
	ds := x.ds.Dispatcher().Stats()
	assert.Equal(t, uint64(6), ds.Completed)
	assert.Zero(t, ds.Stale)
	assert.Zero(t, ds.Parked)
}

// TestDispatcherSilentAgentIsProbedThenRetried: the Stage 2 agent says
// nothing; the Dispatcher's progress deadline stalls and parks it, the
// pipeline hears the worker went idle and probes it, nobody answers, the
// probe times out and story-{id}-s2-retry takes the stage over (resumed),
// and the story ends merged.
func TestDispatcherSilentAgentIsProbedThenRetried(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	agents := &stageAgents{silentStage: 2, silent: make(chan struct{}, 1)}
	x := newDispatchRig(t, agents, worker.Config{MaxWorkers: 1, LivenessTimeout: -1, ProgressTimeout: time.Minute,
		HeartbeatInterval: time.Hour})
	_, err := x.rt.Start(ctx, item, "Login form")
	require.NoError(t, err)

	select {
	case <-agents.silent:
	case <-ctx.Done():
		t.Fatal("the Stage 2 agent did not start")
	}
	// The Dispatcher's deadline timer and the Runtime's heartbeat ticker.
	require.NoError(t, x.clk.BlockUntil(ctx, 2))
	x.clk.Advance(time.Minute)
	probing := x.inbox.await(t, ctx, "the probe", func(st State) bool { return st.Crash.Phase == health.Probing })
	assert.Equal(t, foreman.WorkerID("story-PROJ-42-s2"), probing.Worker)
	assert.Equal(t, 2, probing.Stage)

	x.clk.Advance(30 * time.Second) // the probe timeout
	st := x.inbox.await(t, ctx, "the end of the story", ended)
	assert.Equal(t, StatusDone, st.Status, "%+v", st.Pause)
	assert.Equal(t, 1, st.Crash.Crashes)
	assert.Equal(t, []foreman.WorkerID{"story-PROJ-42-s0", "story-PROJ-42-s1", "story-PROJ-42-s2",
		"story-PROJ-42-s2-retry", "story-PROJ-42-s3"}, agents.names())
	assert.Equal(t, 1, trailerCommits(t, x.repo, item))
	ds := x.ds.Dispatcher().Stats()
	assert.Equal(t, uint64(1), ds.Stalls)
	assert.Equal(t, uint64(1), ds.Parked)
	assert.Equal(t, uint64(4), ds.Completed)
}

func TestDispatcherSpawnerProbesAndShutdowns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := foreman.NewFakeClock(t0)
	events := make(chan Event, 8)
	started := make(chan struct{}, 1)
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		started <- struct{}{}
		<-ctx.Done()
		return phases.AgentResult{}, ctx.Err()
	})
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: worker.Config{Agent: agent, Commits: worker.NoCommits,
		Clock: clk, LivenessTimeout: -1, ProgressTimeout: -1}, Inbox: recordingInbox{events: events},
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	r := SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "P-1-a1"}
	require.NoError(t, ds.Spawn(ctx, r))
	require.NoError(t, ds.Spawn(ctx, r), "idempotent")
	<-started
	assert.EqualValues(t, 1, ds.Dispatcher().Stats().Submitted, "a spawn repeated while it runs reaches the Dispatcher once")

	// While the Dispatcher runs it, a probe is answered at once.
	probe := Outgoing{Kind: EffectProbe, Item: "P-1", Worker: "w1", Assignment: "P-1-a1", Stage: 2}
	require.NoError(t, ds.Send(ctx, probe))
	assert.Equal(t, Event{Kind: EventStatusReply, Worker: "w1", Assignment: "P-1-a1", Stage: 2}, <-events)

	// A shutdown cancels the agent; its end is nobody's news.
	require.NoError(t, ds.Send(ctx, Outgoing{Kind: EffectShutdown, Item: "P-1", Worker: "w1", Assignment: "P-1-a1"}))
	// A probe of an assignment this spawner never ran (a coordinator
	// restart) times out at once: nobody works on it, so waiting the probe
	// timeout would only delay the crash protocol. The fake clock is not
	// advanced.
	require.NoError(t, ds.Send(ctx, Outgoing{Kind: EffectProbe, Item: "P-1", Worker: "w0", Assignment: "P-1-a0", Stage: 1}))
	assert.Equal(t, Event{Kind: EventProbeTimeout, Worker: "w0", Assignment: "P-1-a0", Stage: 1}, <-events)
	select {
	case ev := <-events:
		t.Fatalf("unexpected %+v", ev)
	default:
	}

	require.NoError(t, ds.Close())
	require.NoError(t, ds.Close(), "twice")
	assert.ErrorIs(t, ds.Spawn(ctx, SpawnRequest{Item: "P-1", Assignment: "P-1-a2"}), ErrSpawnerClosed)
	_, err = NewDispatcherSpawner(DispatcherSpawnerConfig{})
	assert.Error(t, err)
}

// Through the Dispatcher too, the agent's request carries the pipeline's
// assignment in Env (the pipeline's worker and assignment, not the
// Dispatcher's), after what the worker runtime put there, and the prompt
// still ends with the assignment block.
func TestDispatcherSpawnerSetsTheAssignmentEnvironment(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	reqs := make(chan phases.AgentRequest, 1)
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		reqs <- req
		return phases.AgentResult{Success: true}, nil
	})
	events := make(chan Event, 4)
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: worker.Config{Agent: agent, Commits: worker.NoCommits,
		Clock: foreman.NewFakeClock(t0), LivenessTimeout: -1, ProgressTimeout: -1}, Inbox: recordingInbox{events: events},
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	defer func() { assert.NoError(t, ds.Close()) }()
	r := SpawnRequest{Item: "P-1", Stage: 1, Worker: "story-P-1-s1", Assignment: "P-1-a2"}
	require.NoError(t, ds.Spawn(ctx, r))
	var req phases.AgentRequest
	select {
	case req = <-reqs:
	case <-ctx.Done():
		t.Fatal("the agent did not run")
	}
	assert.Equal(t, []string{"FOREMAN_ITEM=P-1", "FOREMAN_STAGE=1", "FOREMAN_WORKER=story-P-1-s1", "FOREMAN_ASSIGNMENT=P-1-a2"}, req.Env)
	block, ok := ParseAssignment(req.TaskPrompt)
	assert.True(t, ok, req.TaskPrompt)
	assert.Equal(t, AgentAssignment{Item: "P-1", Stage: 1, Worker: "story-P-1-s1", Assignment: "P-1-a2"}, block)
	select {
	case <-events: // ended without a report: idle
	case <-ctx.Done():
		t.Fatal("no end reported")
	}
}

// An assignment the Dispatcher parked (here its agent failed) is nobody's
// work any more: its probe times out at once, so the crash protocol does
// not wait the probe timeout in silence for a worker already gone.
func TestDispatcherSpawnerDoesNotProbeWorkThePoolEnded(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	clk := foreman.NewFakeClock(t0)
	events := make(chan Event, 8)
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{ExitCode: 1, Stderr: "no such model"}, errors.New("agent exited 1")
	})
	ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Worker: worker.Config{Agent: agent, Commits: worker.NoCommits,
		Clock: clk, LivenessTimeout: -1, ProgressTimeout: -1}, Inbox: recordingInbox{events: events},
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	defer ds.Close()
	r := SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "P-1-a1"}
	require.NoError(t, ds.Spawn(ctx, r))
	select {
	case ev := <-events:
		assert.Equal(t, Event{Kind: EventIdle, Worker: "w1", Assignment: "P-1-a1"}, ev)
	case <-ctx.Done():
		t.Fatal("no EventIdle for the parked assignment")
	}
	require.NoError(t, ds.Send(ctx, Outgoing{Kind: EffectProbe, Item: "P-1", Worker: "w1", Assignment: "P-1-a1", Stage: 2}))
	select {
	case ev := <-events:
		assert.Equal(t, Event{Kind: EventProbeTimeout, Worker: "w1", Assignment: "P-1-a1", Stage: 2}, ev)
	case <-ctx.Done():
		t.Fatal("the probe of ended work waited for the probe timeout")
	}
}
