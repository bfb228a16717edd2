package pipeline

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

type agentFunc func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error)

func (f agentFunc) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	return f(ctx, req)
}

type nopGit struct{}

func (nopGit) CreateWorktree(context.Context, foreman.ItemID) error { return nil }
func (nopGit) RemoveWorktree(context.Context, foreman.ItemID) error { return nil }
func (nopGit) Merge(context.Context, MergeRequest) (MergeOutcome, error) {
	return MergeOutcome{Commit: "c1"}, nil
}

type reportSignal chan State

func (r reportSignal) AppendReport(_ context.Context, e ReportEntry) error {
	r <- e.State
	return nil
}

func TestAgentSpawnerRunsAStoryAndResumesACrash(t *testing.T) {
	ctx := context.Background()
	board := NewFileBoard(filepath.Join(t.TempDir(), "kanban.json"))
	var mu sync.Mutex
	var prompts []string
	crashed := false
	agent := agentFunc(func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error) {
		mu.Lock()
		prompts = append(prompts, req.TaskPrompt)
		first := !crashed
		mu.Unlock()
		var stage int
		var it foreman.ItemID
		_, err := fmt.Sscanf(req.TaskPrompt, "Execute Stage %d for %s", &stage, &it)
		require.NoError(t, err)
		it = foreman.ItemID(strings.TrimSuffix(string(it), "."))
		switch stage {
		case 0:
			require.NoError(t, board.AddTasks(ctx, it, "T1"))
		case 1:
			require.NoError(t, board.SetStatus(ctx, it, BoardTodo))
		case 2:
			if first {
				mu.Lock()
				crashed = true
				mu.Unlock()
				return phases.AgentResult{ExitCode: 137, Signal: "killed"}, nil
			}
			require.NoError(t, board.SetStatus(ctx, it, BoardToReview))
		}
		return phases.AgentResult{Success: true, Result: "All done.\n" + reportLine(it, stage, Pass) + "\n"}, nil
	})
	done := make(reportSignal, 1)
	inbox := &lateInbox{}
	sp, err := NewAgentSpawner(AgentSpawnerConfig{Agent: agent, Inbox: inbox,
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	rt, err := NewRuntime(RuntimeConfig{Store: store.NewMemory(store.MemoryOptions{}), Spawner: sp, Messenger: sp,
		Worktrees: nopGit{}, Merger: nopGit{}, Board: board, Reporter: done})
	require.NoError(t, err)
	inbox.set(rt)

	_, err = rt.Start(ctx, "PROJ-9", "")
	require.NoError(t, err)
	st := <-done
	require.NoError(t, sp.Close())
	require.NoError(t, sp.Close(), "twice")
	assert.Equal(t, StatusDone, st.Status)
	assert.Equal(t, 1, st.Crash.Crashes)
	assert.Equal(t, 0, sp.Running())
	require.Len(t, prompts, 5, "four stages and one resumed Stage 2")
	task, _, _ := strings.Cut(prompts[2], "\n\n")
	assert.Equal(t, "Execute Stage 2 for PROJ-9.\nReadiness: 8.", task)
	assert.True(t, strings.HasPrefix(prompts[3], task+"\n\n"), "the resumed Stage 2 gets the same task")
	as, ok := ParseAssignment(prompts[3])
	require.True(t, ok)
	assert.Equal(t, AgentAssignment{Item: "PROJ-9", Stage: 2, Worker: "story-PROJ-9-s2-retry", Assignment: "PROJ-9-a4"}, as)
	assert.ErrorIs(t, sp.Spawn(ctx, SpawnRequest{Item: "PROJ-9", Assignment: "x"}), ErrSpawnerClosed)
}

// lateInbox lets the spawner be built before the runtime it reports to.
type lateInbox struct {
	mu sync.Mutex
	rt *Runtime
}

func (l *lateInbox) set(rt *Runtime) { l.mu.Lock(); l.rt = rt; l.mu.Unlock() }
func (l *lateInbox) get() *Runtime   { l.mu.Lock(); defer l.mu.Unlock(); return l.rt }
func (l *lateInbox) Handle(ctx context.Context, item foreman.ItemID, ev Event) (State, error) {
	return l.get().Handle(ctx, item, ev)
}
func (l *lateInbox) Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (State, error) {
	return l.get().Deliver(ctx, item, env)
}

func TestReportLineAndDefaultPrompt(t *testing.T) {
	rep, ok := reportLineOf("P-1", "thinking...\nStage 2 COMPLETE for P-1. All tasks Done. Story set to To Review.\nbye")
	assert.True(t, ok)
	assert.Equal(t, "Stage 2 COMPLETE for P-1. All tasks Done. Story set to To Review.", rep.raw)
	assert.Equal(t, message.Stage2Complete{Item: "P-1"}, rep.msg)
	_, ok = reportLineOf("P-1", "Stage 2 COMPLETE for P-2. All tasks Done. Story set to To Review.")
	assert.False(t, ok, "another item's line")
	assert.Equal(t, "Execute Stage 3 for P-1 (Login).\nReadiness: 7.\nPrevious round: no tests\n",
		DefaultPrompt(SpawnRequest{Item: "P-1", Title: "Login", Stage: 3, Readiness: "7", Feedback: "no tests"}))
}

type recordingInbox struct{ events chan Event }

func (r recordingInbox) Handle(_ context.Context, _ foreman.ItemID, ev Event) (State, error) {
	r.events <- ev
	return State{}, nil
}
func (r recordingInbox) Deliver(_ context.Context, _ foreman.ItemID, env message.Envelope) (State, error) {
	ev, _ := EventOf(env)
	r.events <- ev
	return State{}, nil
}

func TestAgentSpawnerResumesFromTheCheckpoint(t *testing.T) {
	ctx := context.Background()
	cps, err := health.NewCheckpointStore(health.CheckpointStoreConfig{Dir: t.TempDir(), WorktreeRoots: []string{t.TempDir()}})
	require.NoError(t, err)
	reqs := make(chan phases.AgentRequest, 4)
	agent := agentFunc(func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error) {
		reqs <- req
		return phases.AgentResult{Result: "no line here"}, nil
	})
	inbox := recordingInbox{events: make(chan Event, 4)}
	sp, err := NewAgentSpawner(AgentSpawnerConfig{Agent: agent, Inbox: inbox, Checkpoints: cps,
		Workspace: func(foreman.ItemID) (string, error) { return "/w", nil }})
	require.NoError(t, err)
	defer sp.Close()

	// No checkpoint: a plain fresh worker.
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "a1", Resume: true}))
	assert.Equal(t, "Execute Stage 2 for P-1.\n"+AssignmentBlock(SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "a1"}),
		(<-reqs).TaskPrompt)
	ev := <-inbox.events
	assert.Equal(t, Event{Kind: EventIdle, Worker: "w1", Assignment: "a1"}, ev, "ended without a report: idle")

	require.NoError(t, cps.Save(ctx, health.Checkpoint{Item: "P-1", Stage: 2, Assignment: "a1",
		TasksCompleted: []string{"T1"}, TasksRemaining: []string{"T2"}}, health.SaveOptions{}))
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w2", Assignment: "a2", Resume: true}))
	assert.Contains(t, (<-reqs).TaskPrompt, "CHECKPOINT RESUME")
	<-inbox.events

	require.NoError(t, cps.Save(ctx, health.Checkpoint{Item: "P-1", Stage: 2, Assignment: "a2", AgentSession: "sess-1",
		TasksCompleted: []string{}, TasksRemaining: []string{}}, health.SaveOptions{}))
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w3", Assignment: "a3", Resume: true}))
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w3", Assignment: "a3", Resume: true}), "idempotent")
	assert.Equal(t, "sess-1", (<-reqs).SessionID)
	<-inbox.events

	// A probe of a finished agent is answered with idle.
	require.NoError(t, sp.Send(ctx, Outgoing{Kind: EffectProbe, Item: "P-1", Worker: "w3", Assignment: "a3"}))
	assert.Equal(t, EventIdle, (<-inbox.events).Kind)
	assert.Empty(t, reqs, "a3 ran once")
}

// A plain-text agent (agentcmd's text format) has no final message: its
// report is the last canonical line of its output.
func TestAgentSpawnerReadsAPlainTextAgentsOutput(t *testing.T) {
	ctx := context.Background()
	agent := agentFunc(func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true, Output: "planning\nStage 0 COMPLETE for P-1. 2 tasks created. Plan score: 3/4.\n\n"}, nil
	})
	inbox := recordingInbox{events: make(chan Event, 4)}
	sp, err := NewAgentSpawner(AgentSpawnerConfig{Agent: agent, Inbox: inbox,
		Workspace: func(foreman.ItemID) (string, error) { return "/w", nil }})
	require.NoError(t, err)
	defer sp.Close()
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 0, Worker: "w1", Assignment: "a1"}))
	ev := <-inbox.events
	assert.Equal(t, Event{Kind: EventReport, Worker: "w1", Assignment: "a1", Stage: 0, Outcome: Complete, Tasks: 2, Score: "3"}, ev)
}

// The agent is told its item, stage, worker and assignment in the
// assignment block at the end of its prompt.
func TestAssignmentBlockRoundTrip(t *testing.T) {
	r := SpawnRequest{Item: "P-1", Stage: 3, Worker: "story-P-1-s3", Assignment: "P-1-a7"}
	p := DefaultPrompt(r) + AssignmentBlock(r)
	assert.Equal(t, "Execute Stage 3 for P-1.\n\nForeman-Item: P-1\nForeman-Stage: 3\nForeman-Worker: story-P-1-s3\nForeman-Assignment: P-1-a7\n", p)
	got, ok := ParseAssignment(p)
	require.True(t, ok)
	assert.Equal(t, AgentAssignment{Item: "P-1", Stage: 3, Worker: "story-P-1-s3", Assignment: "P-1-a7"}, got)
	_, ok = ParseAssignment("Execute Stage 3 for P-1.")
	assert.False(t, ok)
}

// StageTimeouts bounds each execution: the agent gets its stage's limit,
// and one that runs out of it ends without a report (idle).
func TestAgentSpawnerStageTimeout(t *testing.T) {
	ctx := context.Background()
	reqs := make(chan phases.AgentRequest, 2)
	agent := agentFunc(func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error) {
		reqs <- req
		if req.Timeout == time.Nanosecond {
			<-ctx.Done() // a stuck agent: only the timeout ends it
			return phases.AgentResult{TimedOut: true}, ctx.Err()
		}
		return phases.AgentResult{Success: true}, nil
	})
	inbox := recordingInbox{events: make(chan Event, 4)}
	sp, err := NewAgentSpawner(AgentSpawnerConfig{Agent: agent, Inbox: inbox,
		Timeouts:  StageTimeouts{Default: time.Hour, Stages: map[int]time.Duration{2: time.Nanosecond}},
		Workspace: func(foreman.ItemID) (string, error) { return "/w", nil }})
	require.NoError(t, err)
	defer sp.Close()
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 2, Worker: "w1", Assignment: "a1"}))
	assert.Equal(t, time.Nanosecond, (<-reqs).Timeout)
	assert.Equal(t, Event{Kind: EventIdle, Worker: "w1", Assignment: "a1"}, <-inbox.events, "timed out: idle")
	require.NoError(t, sp.Spawn(ctx, SpawnRequest{Item: "P-1", Stage: 1, Worker: "w2", Assignment: "a2"}))
	assert.Equal(t, time.Hour, (<-reqs).Timeout)
	<-inbox.events
	assert.Equal(t, time.Duration(0), StageTimeouts{}.For(0))
}

// The agent's request carries its assignment in Env too (FOREMAN_ITEM,
// FOREMAN_STAGE, FOREMAN_WORKER, FOREMAN_ASSIGNMENT), and the prompt still
// ends with the assignment block.
func TestAgentSpawnerSetsTheAssignmentEnvironment(t *testing.T) {
	ctx := context.Background()
	reqs := make(chan phases.AgentRequest, 1)
	agent := agentFunc(func(ctx context.Context, req phases.AgentRequest) (phases.AgentResult, error) {
		reqs <- req
		return phases.AgentResult{Success: true}, nil
	})
	inbox := recordingInbox{events: make(chan Event, 4)}
	sp, err := NewAgentSpawner(AgentSpawnerConfig{Agent: agent, Inbox: inbox,
		Workspace: func(foreman.ItemID) (string, error) { return "/w", nil }})
	require.NoError(t, err)
	defer sp.Close()
	r := SpawnRequest{Item: "P-1", Stage: 2, Worker: "story-P-1-s2", Assignment: "P-1-a3"}
	require.NoError(t, sp.Spawn(ctx, r))
	req := <-reqs
	assert.Equal(t, []string{"FOREMAN_ITEM=P-1", "FOREMAN_STAGE=2", "FOREMAN_WORKER=story-P-1-s2", "FOREMAN_ASSIGNMENT=P-1-a3"}, req.Env)
	assert.Equal(t, DefaultPrompt(r)+AssignmentBlock(r), req.TaskPrompt)
	<-inbox.events
}
