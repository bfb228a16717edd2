package taskgraph

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// fan is a custom pipeline whose first task unblocks four at once:
// A → B, C, D, E → F.
func fan() []TaskSpec {
	return []TaskSpec{
		spec("A", "planner"),
		spec("B", "executor", "A"),
		spec("C", "executor", "A"),
		spec("D", "tester", "A"),
		spec("E", "fe-developer", "A"),
		spec("F", "reviewer", "B", "C", "D", "E"),
	}
}

func inProgress(s *Session) int { return s.Graph.Count(InProgress) }

// TestMaxActiveSpawnPaths drives every handler that spawns through the
// routed texts, with at most two tasks in progress.
func TestMaxActiveSpawnPaths(t *testing.T) {
	c := NewCore(CoreConfig{MaxActive: 2})
	assert.Equal(t, 2, c.MaxActive())
	s := customSession(t, c, fan()...)
	s, _ = handle(t, c, s, Route("start", nil))
	s, res := complete(t, c, s, "A")

	// handleCallback → spawn-next: four ready, two spawned, two held.
	assert.Equal(t, []string{"B", "C"}, res.Spawned)
	assert.Equal(t, []string{"D", "E"}, res.Held)
	assert.Equal(t, 2, inProgress(s))
	assert.Equal(t, Pending, status(t, s, "D"))
	summary := res.Effects[len(res.Effects)-1]
	require.Equal(t, NoteSpawnSummary, summary.Note)
	assert.Contains(t, summary.Text(), "[coordinator] 2 agent(s) spawned. Pipeline: 1/6 completed\n[coordinator] Ready to spawn: D, E (at most 2 active at once)\n")
	assert.Empty(t, res.Violations, "held tasks are pending and consistent")

	// handleSpawnNext at the limit: waiting, nothing changed.
	same, res := handle(t, c, s, Route("go on", nil))
	assert.Same(t, s, same)
	assert.Equal(t, StepWaiting, res.Outcome)
	assert.False(t, res.Changed)
	assert.Equal(t, []string{"D", "E"}, res.Held)
	assert.Equal(t, "[coordinator] Waiting for: B, C\n[coordinator] Ready to spawn: D, E (at most 2 active at once)\n[coordinator] Use 'check' to monitor or 'resume' after completion.", res.Effects[0].Text())

	// handleCheck: the held tasks are ready to spawn, not running.
	_, res = handle(t, c, s, Route("check", nil))
	r := res.Effects[0].Details.Report
	assert.Equal(t, []string{"D", "E"}, r.Ready)
	assert.Len(t, r.ActiveWorkers, 2)
	assert.Contains(t, r.Text(), "[coordinator] Ready to spawn: D, E (at most 2 active at once)\n")

	// handleResume with every worker running: no spawn past the limit.
	_, res = handle(t, c, s, Route("resume", nil))
	assert.Equal(t, StepAllRunning, res.Outcome)
	assert.Empty(t, res.Spawned)

	// A completion frees one slot: exactly one held task is spawned.
	s, res = complete(t, c, s, "B")
	assert.Equal(t, []string{"D"}, res.Spawned)
	assert.Equal(t, []string{"E"}, res.Held)
	assert.Equal(t, 2, inProgress(s))

	// handleResume after a failure while another worker runs: the task is
	// reset (the seed retries it on a later wake-up); then the reset task
	// and the held one compete for the freed slot, in creation order.
	cTask, _ := s.Graph.Task("C")
	s, _, err := c.Update(s, TaskUpdate{Task: "C", To: Failed, Assignment: cTask.Assignment})
	require.NoError(t, err)
	s, res = handle(t, c, s, Route("resume", nil))
	assert.Equal(t, []string{"C"}, res.Reset)
	assert.Equal(t, StepAllRunning, res.Outcome)
	s, res = handle(t, c, s, Route("go", nil))
	assert.Equal(t, []string{"C"}, res.Spawned)
	assert.Equal(t, []string{"E"}, res.Held)
	assert.Equal(t, 2, inProgress(s))

	// handleResume after completions: spawns up to the limit only.
	for _, task := range []string{"C", "D"} {
		tk, _ := s.Graph.Task(task)
		s, _, err = c.Update(s, TaskUpdate{Task: task, To: Completed, Assignment: tk.Assignment})
		require.NoError(t, err)
	}
	s, res = handle(t, c, s, Route("resume", nil))
	assert.ElementsMatch(t, []string{"C", "D"}, res.Completed)
	assert.Equal(t, []string{"E"}, res.Spawned)
	assert.Empty(t, res.Held)
	s, _ = complete(t, c, s, "E")
	s, _ = complete(t, c, s, "F")
	assert.Equal(t, SessionCompleted, s.Status)
}

// TestMaxActiveTable: how many a spawn-next starts for a number of ready
// tasks, tasks already in progress and a limit.
func TestMaxActiveTable(t *testing.T) {
	cases := []struct {
		name      string
		max       int
		running   int // of B..E, started before the limit applies
		spawned   []string
		held      []string
		outcome   StepOutcome
		summaryRe string
	}{
		{"unlimited spawns every ready task", 0, 0, []string{"B", "C", "D", "E"}, nil, StepSpawned, ""},
		{"negative is unlimited", -1, 0, []string{"B", "C", "D", "E"}, nil, StepSpawned, ""},
		{"limit above ready", 9, 0, []string{"B", "C", "D", "E"}, nil, StepSpawned, ""},
		{"limit equal to ready", 4, 0, []string{"B", "C", "D", "E"}, nil, StepSpawned, ""},
		{"limit of one", 1, 0, []string{"B"}, []string{"C", "D", "E"}, StepSpawned, "Ready to spawn: C, D, E (at most 1 active at once)"},
		{"slots left by running tasks", 3, 2, []string{"D"}, []string{"E"}, StepSpawned, "Ready to spawn: E (at most 3 active at once)"},
		{"no slot left", 2, 2, nil, []string{"D", "E"}, StepWaiting, "Ready to spawn: D, E (at most 2 active at once)"},
		{"over the limit (lowered)", 1, 2, nil, []string{"D", "E"}, StepWaiting, "Ready to spawn: D, E (at most 1 active at once)"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			// Start A (and complete it) and tc.running tasks with an
			// unlimited core, then spawn-next under the limit.
			free := NewCore(CoreConfig{})
			s := customSession(t, free, fan()...)
			s, _ = handle(t, free, s, WakeUp{})
			s, _ = complete(t, free, s, "A")
			for _, task := range []string{"B", "C", "D", "E"}[tc.running:] {
				tk, _ := s.Graph.Task(task)
				var err error
				s, _, err = free.Update(s, TaskUpdate{Task: task, To: Cancelled, Assignment: tk.Assignment})
				require.NoError(t, err)
				s, _ = handle(t, free, s, WakeUp{Handler: HandleCallback, Role: tk.Role, Assignment: tk.Assignment})
				s = reopen(t, s, task)
			}
			require.Equal(t, tc.running, inProgress(s))

			c := NewCore(CoreConfig{MaxActive: tc.max})
			_, res := handle(t, c, s, WakeUp{})
			assert.Equal(t, tc.outcome, res.Outcome)
			assert.Equal(t, tc.spawned, res.Spawned)
			assert.Equal(t, tc.held, res.Held)
			text := res.Effects[len(res.Effects)-1].Text()
			if tc.summaryRe == "" {
				assert.NotContains(t, text, "Ready to spawn")
			} else {
				assert.Contains(t, text, tc.summaryRe)
			}
		})
	}
}

// reopen rebuilds s with task pending again (a test shortcut to get a
// session with some of the fan's tasks running and others ready).
func reopen(t *testing.T, s *Session, task string) *Session {
	t.Helper()
	tasks := s.Graph.Tasks()
	for i := range tasks {
		if tasks[i].Subject == task {
			tasks[i].Status, tasks[i].Assignment = Pending, ""
		}
	}
	g, err := buildGraph(nil, tasks)
	require.NoError(t, err)
	n := s.clone()
	n.Graph = g
	return n
}

// TestMaxActiveRuntime: the limit through Config.Core, with the spawner
// seeing only the allowed spawns.
func TestMaxActiveRuntime(t *testing.T) {
	ctx := context.Background()
	sp := &recordingSpawner{}
	rt, err := NewRuntime(Config{Store: newMemory(), Spawner: sp, Core: CoreConfig{MaxActive: 1}})
	require.NoError(t, err)
	_, err = rt.Create(ctx, "s1", "", ModeFullstack, nil)
	require.NoError(t, err)
	_, err = rt.StepText(ctx, "s1", "start")
	require.NoError(t, err)
	_, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback, Role: "planner", Assignment: sp.calls[0].Assignment, Outcome: OutcomeCompleted})
	require.NoError(t, err)
	require.Len(t, sp.calls, 2, "PLAN-001, then one of IMPL-001 and DEV-FE-001")
	assert.Equal(t, "IMPL-001", sp.calls[1].Task)
	report, err := rt.Status(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, []string{"DEV-FE-001"}, report.Ready)
	assert.Equal(t, 1, report.MaxActive)
	require.Len(t, report.ActiveWorkers, 1)
	assert.Equal(t, "IMPL-001", report.ActiveWorkers[0].Task)
}
