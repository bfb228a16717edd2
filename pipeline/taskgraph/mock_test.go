package taskgraph_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/taskgraph/taskgraphmock"
)

// effectMatcher matches an Effect by kind, note and task.
type effectMatcher struct {
	kind taskgraph.EffectKind
	note taskgraph.Note
	task string
}

func (m effectMatcher) Matches(x any) bool {
	e, ok := x.(taskgraph.Effect)
	return ok && e.Kind == m.kind && e.Note == m.note && e.Task == m.task
}

func (m effectMatcher) String() string {
	return fmt.Sprintf("effect %s %s %s", m.kind, m.note, m.task)
}

func report(note taskgraph.Note, task string) gomock.Matcher {
	return effectMatcher{taskgraph.EffectReport, note, task}
}

func logged(note taskgraph.Note, task string) gomock.Matcher {
	return effectMatcher{taskgraph.EffectLog, note, task}
}

// spawnOf is the request the runtime builds for a task of the fe-only or
// fullstack pipeline.
func spawnOf(t *testing.T, session, task, role, assignment string, mode taskgraph.Mode) taskgraph.SpawnRequest {
	t.Helper()
	specs, _ := taskgraph.PipelineTasks(mode)
	req := taskgraph.SpawnRequest{Session: session, Team: "team", Task: task, Role: role, Assignment: foreman.AssignmentID(assignment)}
	for _, sp := range specs {
		if sp.Subject == task {
			req.Description = sp.Description
		}
	}
	req.Prompt = taskgraph.DefaultPrompt(req)
	return req
}

type mocks struct {
	spawner  *taskgraphmock.MockSpawner
	reporter *taskgraphmock.MockReporter
	store    store.Store
}

func newMocks(t *testing.T) mocks {
	ctrl := gomock.NewController(t)
	return mocks{taskgraphmock.NewMockSpawner(ctrl), taskgraphmock.NewMockReporter(ctrl), store.NewMemory(store.MemoryOptions{})}
}

func (m mocks) runtime(t *testing.T, core taskgraph.CoreConfig) *taskgraph.Runtime {
	t.Helper()
	rt, err := taskgraph.NewRuntime(taskgraph.Config{Store: m.store, Spawner: m.spawner, Reporter: m.reporter, Core: core})
	require.NoError(t, err)
	return rt
}

// TestRuntimeSpawnsAndReportsInOrder: a step's effects reach the Spawner
// and the Reporter in the order the core decided them, each spawn with the
// full request, and an unchanged check spawns nothing.
func TestRuntimeSpawnsAndReportsInOrder(t *testing.T) {
	ctx := context.Background()
	m := newMocks(t)
	rt := m.runtime(t, taskgraph.CoreConfig{})
	_, err := rt.Create(ctx, "s1", "team", taskgraph.ModeFEOnly, nil)
	require.NoError(t, err)

	gomock.InOrder(
		m.reporter.EXPECT().Report(gomock.Any(), "s1", logged(taskgraph.NoteUnblocked, "PLAN-001")),
		m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "PLAN-001", "planner", "PLAN-001.1", taskgraph.ModeFEOnly)),
		m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteSpawned, "PLAN-001")),
		m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteSpawnSummary, "")),
	)
	_, err = rt.StepText(ctx, "s1", "start")
	require.NoError(t, err)

	m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteStatus, ""))
	res, err := rt.StepText(ctx, "s1", "check")
	require.NoError(t, err)
	assert.False(t, res.Changed)

	gomock.InOrder(
		m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteConfirmed, "PLAN-001")),
		m.reporter.EXPECT().Report(gomock.Any(), "s1", logged(taskgraph.NoteUnblocked, "DEV-FE-001")),
		m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "DEV-FE-001", "fe-developer", "DEV-FE-001.2", taskgraph.ModeFEOnly)),
		m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteSpawned, "DEV-FE-001")),
		m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteSpawnSummary, "")),
	)
	_, err = rt.Step(ctx, "s1", taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: "planner", Assignment: "PLAN-001.1", Outcome: taskgraph.OutcomeCompleted})
	require.NoError(t, err)
}

// TestRestartReissuesTheSpawnOnce: a spawn that failed is re-issued, with
// the same assignment, by the next invocation before its own step, and
// only once.
func TestRestartReissuesTheSpawnOnce(t *testing.T) {
	ctx := context.Background()
	m := newMocks(t)
	_, err := m.runtime(t, taskgraph.CoreConfig{}).Create(ctx, "s1", "team", taskgraph.ModeFEOnly, nil)
	require.NoError(t, err)
	m.reporter.EXPECT().Report(gomock.Any(), "s1", gomock.Any()).AnyTimes()
	down := errors.New("spawner down")
	plan := spawnOf(t, "s1", "PLAN-001", "planner", "PLAN-001.1", taskgraph.ModeFEOnly)
	gomock.InOrder(
		m.spawner.EXPECT().Spawn(gomock.Any(), plan).Return(down),
		m.spawner.EXPECT().Spawn(gomock.Any(), plan).Return(nil),
	)
	_, err = m.runtime(t, taskgraph.CoreConfig{}).StepText(ctx, "s1", "start")
	require.ErrorIs(t, err, down)

	res, err := m.runtime(t, taskgraph.CoreConfig{}).StepText(ctx, "s1", "go")
	require.NoError(t, err)
	assert.Equal(t, taskgraph.StepWaiting, res.Outcome, "the re-issued spawn, then the step: PLAN-001 runs")
}

// TestMaxActiveSpawnsOnlyUpToTheLimit: with MaxActive 1 the Spawner never
// sees a second task while one runs; any extra Spawn fails the test.
func TestMaxActiveSpawnsOnlyUpToTheLimit(t *testing.T) {
	ctx := context.Background()
	m := newMocks(t)
	rt := m.runtime(t, taskgraph.CoreConfig{MaxActive: 1})
	_, err := rt.Create(ctx, "s1", "team", taskgraph.ModeFullstack, nil)
	require.NoError(t, err)
	m.reporter.EXPECT().Report(gomock.Any(), "s1", gomock.Any()).AnyTimes()
	gomock.InOrder(
		m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "PLAN-001", "planner", "PLAN-001.1", taskgraph.ModeFullstack)),
		m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "IMPL-001", "executor", "IMPL-001.2", taskgraph.ModeFullstack)),
		m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "DEV-FE-001", "fe-developer", "DEV-FE-001.3", taskgraph.ModeFullstack)),
	)
	_, err = rt.StepText(ctx, "s1", "start")
	require.NoError(t, err)
	res, err := rt.Step(ctx, "s1", taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: "planner", Assignment: "PLAN-001.1", Outcome: taskgraph.OutcomeCompleted})
	require.NoError(t, err)
	assert.Equal(t, []string{"DEV-FE-001"}, res.Held)
	_, err = rt.StepText(ctx, "s1", "go")
	require.NoError(t, err)
	_, err = rt.Step(ctx, "s1", taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: "executor", Assignment: "IMPL-001.2", Outcome: taskgraph.OutcomeCompleted})
	require.NoError(t, err)
}

// TestParkedTaskIsNeverRespawned: after a park, neither the worker's
// failure nor a resume reaches the Spawner; the person is told.
func TestParkedTaskIsNeverRespawned(t *testing.T) {
	ctx := context.Background()
	m := newMocks(t)
	rt := m.runtime(t, taskgraph.CoreConfig{})
	_, err := rt.Create(ctx, "s1", "team", taskgraph.ModeFEOnly, nil)
	require.NoError(t, err)
	// The notes this test is about must each be reported; gomock tries
	// expectations in the order they were set, so the catch-all comes last.
	m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteParked, "PLAN-001"))
	m.reporter.EXPECT().Report(gomock.Any(), "s1", report(taskgraph.NoteStalled, ""))
	m.reporter.EXPECT().Report(gomock.Any(), "s1", gomock.Any()).AnyTimes()
	m.spawner.EXPECT().Spawn(gomock.Any(), spawnOf(t, "s1", "PLAN-001", "planner", "PLAN-001.1", taskgraph.ModeFEOnly))
	_, err = rt.StepText(ctx, "s1", "start")
	require.NoError(t, err)
	_, err = rt.Update(ctx, "s1", taskgraph.TaskUpdate{Task: "PLAN-001", To: taskgraph.Parked, Assignment: "PLAN-001.1"})
	require.NoError(t, err)

	_, err = rt.Step(ctx, "s1", taskgraph.WakeUp{Handler: taskgraph.HandleCallback, Role: "planner", Assignment: "PLAN-001.1", Outcome: taskgraph.OutcomeFailed})
	require.NoError(t, err)
	res, err := rt.StepText(ctx, "s1", "resume")
	require.NoError(t, err)
	assert.Equal(t, taskgraph.StepStalled, res.Outcome)
}
