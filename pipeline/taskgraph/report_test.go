package taskgraph

import (
	"encoding/json"
	"flag"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test -update to create it")
	assert.Equal(t, string(want), got)
}

// advance completes tasks in order, spawning as the coordinator does.
func advance(t *testing.T, c *Core, s *Session, at time.Time, tasks ...string) *Session {
	t.Helper()
	for _, task := range tasks {
		tk, _ := s.Graph.Task(task)
		s, _ = handle(t, c, s, WakeUp{Handler: HandleCallback, Role: tk.Role, Assignment: tk.Assignment, Outcome: OutcomeCompleted, At: at})
	}
	return s
}

func TestReportGolden(t *testing.T) {
	c := NewCore(CoreConfig{})
	start := func(mode Mode) *Session {
		s := newSession(t, c, mode)
		s, _ = handle(t, c, s, WakeUp{At: t0})
		return s
	}
	spec12 := []string{"RESEARCH-001", "DISCUSS-001", "DRAFT-001", "DISCUSS-002", "DRAFT-002", "DISCUSS-003", "DRAFT-003", "DISCUSS-004", "DRAFT-004", "DISCUSS-005", "QUALITY-001", "DISCUSS-006"}

	cases := []struct {
		name string
		s    func() *Session
		at   time.Time
	}{
		{"fullstack_parallel", func() *Session {
			s := start(ModeFullstack)
			s = advance(t, c, s, t0.Add(time.Minute), "PLAN-001")
			return advance(t, c, s, t0.Add(2*time.Minute), "IMPL-001", "DEV-FE-001")
		}, t0.Add(5 * time.Minute)},
		{"impl_only_start", func() *Session { return start(ModeImplOnly) }, t0.Add(20 * time.Second)},
		{"spec_only_midway", func() *Session {
			return advance(t, c, start(ModeSpecOnly), t0, spec12[:5]...)
		}, t0.Add(2*time.Hour + 5*time.Minute)},
		{"full_lifecycle_checkpoint", func() *Session {
			return advance(t, c, start(ModeFullLifecycle), t0, spec12...)
		}, t0.Add(time.Hour)},
		{"full_lifecycle_fe_not_started", func() *Session { return newSession(t, c, ModeFullLifecycleFE) }, t0},
		{"fe_only_complete", func() *Session {
			return advance(t, c, start(ModeFEOnly), t0, "PLAN-001", "DEV-FE-001", "QA-FE-001")
		}, t0.Add(time.Hour)},
		{"stalled_missing_and_failed", func() *Session {
			specs, _ := PipelineTasks(ModeImplOnly)
			s, err := c.NewSession("s1", ModeImplOnly, specs[:2], t0)
			require.NoError(t, err)
			s, _ = handle(t, c, s, WakeUp{At: t0})
			p, _ := s.Graph.Task("PLAN-001")
			s, _, err = c.Update(s, TaskUpdate{Task: "PLAN-001", To: Failed, Assignment: p.Assignment})
			require.NoError(t, err)
			return s
		}, t0.Add(3 * time.Minute)},
		{"custom_with_cancelled", func() *Session {
			s := customSession(t, c, chain()...)
			s, _ = handle(t, c, s, WakeUp{At: t0})
			s = advance(t, c, s, t0, "A")
			s, _, err := c.Update(s, TaskUpdate{Task: "D", To: Cancelled})
			require.NoError(t, err)
			return s
		}, t0.Add(61 * time.Minute)},
		{"custom_stories_by_level", func() *Session {
			s := customSession(t, c, stories()...)
			s, _ = handle(t, c, s, WakeUp{At: t0})
			return advance(t, c, s, t0.Add(10*time.Minute), "US-001", "US-003")
		}, t0.Add(25 * time.Minute)},
		{"impl_only_with_custom_fix_round", func() *Session {
			s := advance(t, c, start(ModeImplOnly), t0, "PLAN-001", "IMPL-001")
			s, err := c.AddTasks(s,
				TaskSpec{Subject: "FIX-001", Role: "executor", BlockedBy: []string{"TEST-001", "REVIEW-001"}},
				TaskSpec{Subject: "RETEST-001", Role: "tester", BlockedBy: []string{"FIX-001"}})
			require.NoError(t, err)
			return s
		}, t0.Add(7 * time.Minute)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.s()
			_, res := handle(t, c, s, WakeUp{Handler: HandleCheck, At: tc.at})
			require.Len(t, res.Effects, 1)
			golden(t, tc.name, res.Effects[0].Text())
		})
	}
}

func TestReportJSON(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := newSession(t, c, ModeFullstack)
	s, _ = handle(t, c, s, WakeUp{At: t0})
	s = advance(t, c, s, t0.Add(time.Minute), "PLAN-001")
	r := c.Status(s, t0.Add(4*time.Minute))
	b, err := json.Marshal(r)
	require.NoError(t, err)
	var back StatusReport
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, r.Text(), back.Text(), "the JSON holds everything the text shows")
	assert.Equal(t, 1, back.Completed)
	assert.Equal(t, 6, back.Total)
	assert.Equal(t, 17, back.Percent)
	assert.Equal(t, []string{"IMPL-001", "DEV-FE-001"}, []string{back.ActiveWorkers[0].Task, back.ActiveWorkers[1].Task})
	assert.Equal(t, 3*time.Minute, back.ActiveWorkers[0].Elapsed)
	assert.Equal(t, "3m", back.ActiveWorkers[0].ElapsedText)
	assert.Equal(t, "BE", back.Graph[0].Lines[1].Branch)
	var raw map[string]any
	require.NoError(t, json.Unmarshal(b, &raw))
	for _, key := range []string{"mode", "completed", "total", "percent", "graph", "active_workers", "ready", "state"} {
		assert.Contains(t, raw, key)
	}
}

func TestElapsedText(t *testing.T) {
	for d, want := range map[time.Duration]string{
		0: "<1m", 59 * time.Second: "<1m", time.Minute: "1m", 59 * time.Minute: "59m",
		time.Hour: "1h0m", 2*time.Hour + 5*time.Minute: "2h5m",
	} {
		assert.Equal(t, want, elapsedText(d), d)
	}
}

func TestReportOrphanShowsUnknownElapsed(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{At: t0})
	s = s.clone()
	s.ActiveWorkers = nil
	r := c.Status(s, t0)
	assert.Equal(t, "unknown", r.ActiveWorkers[0].ElapsedText)
	assert.Equal(t, CheckNoOrphans, r.Violations[0].Check)
}

// stories is a custom graph shaped like the quickstart's: created out of
// dependency order, with a fan-out and a join.
func stories() []TaskSpec {
	return []TaskSpec{
		spec("US-006", "executor", "US-004", "US-005"),
		spec("US-001", "executor"),
		spec("US-002", "executor"),
		spec("US-003", "executor"),
		spec("US-004", "executor", "US-001"),
		spec("US-005", "executor", "US-003"),
	}
}

// TestReportCustomPipelineNotCreated: tasks a custom pipeline expects but
// that do not exist yet are shown at their level with their blockers.
func TestReportCustomPipelineNotCreated(t *testing.T) {
	c := NewCore(CoreConfig{Pipelines: func(m Mode) ([]TaskSpec, bool) { return stories(), m == "stories" }})
	s, err := c.NewSession("s1", "stories", stories()[1:4], t0)
	require.NoError(t, err)
	s, _ = handle(t, c, s, WakeUp{At: t0})
	_, res := handle(t, c, s, WakeUp{Handler: HandleCheck, At: t0.Add(time.Minute)})
	golden(t, "custom_pipeline_not_created", res.Effects[0].Text())
	r := res.Effects[0].Details.Report
	require.Len(t, r.Graph, 1)
	var levels []int
	for _, ln := range r.Graph[0].Lines {
		levels = append(levels, ln.Level)
	}
	assert.Equal(t, []int{0, 0, 0, 1, 1, 2}, levels)
	assert.Equal(t, "US-006", r.Graph[0].Lines[5].Tasks[0].Subject)
	assert.Equal(t, []string{"US-004", "US-005"}, r.Graph[0].Lines[5].Tasks[0].BlockedBy)
	assert.Equal(t, notCreated, r.Graph[0].Lines[5].Tasks[0].Status)
}

func TestDependencyLinesToleratesCycleInExpectedTasks(t *testing.T) {
	lines := dependencyLines([]TaskView{{Subject: "X", BlockedBy: []string{"Y"}}, {Subject: "Y", BlockedBy: []string{"X"}}})
	assert.Len(t, lines, 2)
}
