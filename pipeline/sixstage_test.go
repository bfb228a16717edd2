package pipeline

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
)

// sixStages is a flow of six stages, beyond the story flow's four: plan,
// validate, design, build, review (which sends the build back) and a
// quality gate, with outcomes of its own ("APPROVED", "CHANGES").
func sixStages() *Flow {
	return &Flow{
		Name: "six", Worker: "six-{id}-s{stage}",
		Stages: []StageSpec{
			{Name: "plan", Rules: []Rule{{Outcome: Complete, Action: Advance, Check: BoardCheck{TasksExist: true},
				Result: "{tasks} tasks, {score}/4", MaxScore: message.MaxPlanScore}}},
			{Name: "validate", Rules: []Rule{{Outcome: Go, Action: Advance, Result: "GO, {score}", KeepScore: true}}},
			{Name: "design", Rules: []Rule{{Outcome: Complete, Action: Advance, Result: "designed"},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}", Escalate: "{id}: {detail}"}}},
			{Name: "build", Rules: []Rule{{Outcome: Complete, Action: Advance, Result: "built"}}},
			{Name: "review", Rules: []Rule{{Outcome: "APPROVED", Action: Advance, Result: "approved {score}/10", MaxScore: 10},
				{Outcome: "CHANGES", Action: Rework, Target: 3, Limit: 2, Feedback: true, Worker: "six-{id}-s3-fix{n}",
					Result: "changes: {detail}", Escalate: "{id}: review failed {n} times"}}},
			{Name: "quality", Rules: []Rule{{Outcome: Pass, Action: MergeDone, Result: "{verdict} {score}/100", MaxScore: 100}}},
		},
	}
}

// sixAgents performs the six stages in process: the plan puts tasks on the
// board, the build commits a file, the first review asks for changes. typed
// hands each report over as a message.Report (a ReportingAgent); otherwise
// the agent prints its line, as an agent in another process does.
type sixAgents struct {
	board *FileBoard
	typed bool

	mu       sync.Mutex
	workers  []foreman.WorkerID
	reviews  int
	feedback []string
}

func (a *sixAgents) Execute(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
	if a.typed {
		return phases.AgentResult{}, errors.New("Execute called: the typed report was not asked for")
	}
	res, m, err := a.ExecuteReport(ctx, req, on)
	if m != nil {
		res.Output = "done\n" + message.Line(m) + "\n"
	}
	return res, err
}

func (a *sixAgents) ExecuteReport(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, message.Message, error) {
	as, ok := ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, nil, errors.New("no assignment block")
	}
	a.mu.Lock()
	a.workers = append(a.workers, as.Worker)
	if _, fb, ok := strings.Cut(req.TaskPrompt, "Previous round: "); ok {
		a.feedback = append(a.feedback, strings.TrimSpace(strings.SplitN(fb, "\n", 2)[0]))
	}
	a.mu.Unlock()
	r := message.Report{Item: as.Item, Stage: as.Stage, Outcome: message.OutcomeComplete}
	switch as.Stage {
	case 0:
		if err := a.board.Put(ctx, as.Item, BoardEntry{Status: "Backlog", Tasks: []string{"T1", "T2"}}); err != nil {
			return phases.AgentResult{}, nil, err
		}
		r.Score, r.HasScore, r.Tasks = 4, true, 2
	case 1:
		r.Outcome, r.Score, r.HasScore = "GO", 8, true
	case 3:
		name := filepath.Join(req.WorkspacePath, "feature-"+string(as.Assignment)+".txt")
		if err := os.WriteFile(name, []byte(as.Worker+"\n"), 0o644); err != nil {
			return phases.AgentResult{}, nil, err
		}
		g := gitexec.Runner{Author: testIdentity, Committer: testIdentity}
		if _, err := g.Run(ctx, req.WorkspacePath, "add", "-A"); err != nil {
			return phases.AgentResult{}, nil, err
		}
		if _, err := g.Run(ctx, req.WorkspacePath, "commit", "-q", "-m", "work of "+string(as.Worker)); err != nil {
			return phases.AgentResult{}, nil, err
		}
	case 4:
		a.mu.Lock()
		a.reviews++
		first := a.reviews == 1
		a.mu.Unlock()
		r.Outcome, r.Score, r.HasScore = "APPROVED", 9, true
		if first {
			r.Outcome, r.Score, r.Detail = "CHANGES", 4, "name the error path"
		}
	case 5:
		r.Outcome, r.Score, r.HasScore = "PASS", 97, true
	}
	return phases.AgentResult{Success: true}, r, nil
}

// TestSixStageFlowThroughTheDispatcher runs a story through a flow of six
// stages on a real worker.Dispatcher and Runtime, its reports handed over
// typed (nothing formatted, nothing parsed: the agent prints nothing, so a
// spawner that read lines would find none) and, the same again, printed as
// lines parsed once at the boundary (Report lines for stages 4 and 5).
func TestSixStageFlowThroughTheDispatcher(t *testing.T) {
	for _, typed := range []bool{true, false} {
		name := map[bool]string{true: "typed", false: "printed"}[typed]
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			r := newRig(t)
			agents := &sixAgents{board: r.board, typed: typed}
			var agent phases.AgentDriver = agents
			if !typed {
				agent = worker.AgentFunc(agents.Execute) // hides ExecuteReport
			}
			inbox := &watchingInbox{states: make(chan State, 256)}
			ds, err := NewDispatcherSpawner(DispatcherSpawnerConfig{Inbox: inbox, Workspace: r.mgr.Path,
				Worker: worker.Config{MaxWorkers: 2, Agent: agent, Commits: worker.NoCommits, Clock: r.clk}})
			require.NoError(t, err)
			t.Cleanup(func() { assert.NoError(t, ds.Close()) })
			rt, err := NewRuntime(RuntimeConfig{Flow: sixStages(), Store: store.NewMemory(store.MemoryOptions{}),
				Spawner: ds, Messenger: ds, Worktrees: Git{Manager: r.mgr}, Merger: Git{Manager: r.mgr},
				Board: r.board, Reporter: r.rep, Clock: r.clk})
			require.NoError(t, err)
			inbox.set(rt)

			_, err = rt.Start(ctx, item, "Six stages")
			require.NoError(t, err)
			st := inbox.await(t, ctx, "the end of the story", ended)
			require.Equal(t, StatusDone, st.Status, "%+v", st.Pause)
			assert.Equal(t, 1, trailerCommits(t, r.repo, item))
			require.Len(t, st.Stages, 6)
			results := make([]string, 6)
			for i, s := range st.Stages {
				results[i] = s.Result
			}
			assert.Equal(t, []string{"2 tasks, 4/4", "GO, 8", "designed", "built", "approved 9/10", "PASS 97/100"}, results)
			assert.Equal(t, 1, st.Stages[4].Failures, "the review's CHANGES")
			assert.Equal(t, []foreman.WorkerID{"six-PROJ-42-s0", "six-PROJ-42-s1", "six-PROJ-42-s2", "six-PROJ-42-s3",
				"six-PROJ-42-s4", "six-PROJ-42-s3-fix1", "six-PROJ-42-s4", "six-PROJ-42-s5"}, agents.workers)
			assert.Equal(t, []string{"name the error path"}, agents.feedback)
			assert.Zero(t, rt.Stats().Stale)
			assert.Equal(t, uint64(8), ds.Dispatcher().Stats().Completed)
		})
	}
}

func TestFlowOfTooManyStagesIsInvalid(t *testing.T) {
	f := &Flow{Name: "long"}
	for range message.MaxStage + 1 {
		f.Stages = append(f.Stages, StageSpec{Name: "s", Rules: []Rule{{Outcome: Complete, Action: Retry}}})
	}
	require.NoError(t, f.Validate(), "MaxStage+1 stages")
	f.Stages = append(f.Stages, f.Stages[0])
	assert.ErrorIs(t, f.Validate(), ErrInvalidFlow)
}

// TestEventOfReadsEveryReportOneWay: a typed Report and the story-flow
// line that says the same make the same event.
func TestEventOfReadsEveryReportOneWay(t *testing.T) {
	for _, line := range []string{
		"Stage 0 COMPLETE for P-1. 3 tasks created. Plan score: 4/4.",
		"Stage 1 COMPLETE for P-1. Verdict: NO-GO. Readiness: 3. Reason: too big",
		"Stage 2 COMPLETE for P-1. All tasks Done. Story set to To Review.",
		"Stage 3 COMPLETE for P-1. Verdict: FAIL. Quality Score: 40/100. Issues: no tests",
		"Stage 2 ERROR for P-1: boom",
	} {
		m, err := message.Parse(line)
		require.NoError(t, err)
		r, ok := message.ReportOf(m)
		require.True(t, ok)
		fromLine, ok := EventOf(message.Envelope{Sender: "w", Assignment: "P-1-a1", Body: m})
		require.True(t, ok)
		fromReport, ok := EventOf(message.Envelope{Sender: "w", Assignment: "P-1-a1", Body: r})
		require.True(t, ok)
		assert.Equal(t, fromLine, fromReport, line)
		assert.Equal(t, EventReport, fromReport.Kind)
	}
	ev, ok := EventOf(message.Envelope{Body: message.Report{Item: "P-1", Stage: 7, Outcome: "CHANGES", Score: 4, HasScore: true, Tasks: 2, Detail: "x"}})
	require.True(t, ok)
	assert.Equal(t, Event{Kind: EventReport, Stage: 7, Outcome: "CHANGES", Score: "4", Tasks: 2, Detail: "x"}, ev)
	_, ok = EventOf(message.Envelope{Body: message.Ack{Stage: 7, Item: "P-1"}})
	assert.False(t, ok)
}
