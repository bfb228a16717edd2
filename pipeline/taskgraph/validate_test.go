package taskgraph

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestValidate(t *testing.T) {
	c := NewCore(CoreConfig{})
	running := customSession(t, c, chain()...)
	running, _ = handle(t, c, running, WakeUp{})
	require.Empty(t, c.Validate(running))

	cases := []struct {
		name   string
		mutate func(s *Session)
		want   []Check
	}{
		{"worker names no task", func(s *Session) {
			s.ActiveWorkers = append(s.ActiveWorkers, ActiveWorker{Task: "Z", Role: "tester", Assignment: "Z.9"})
		}, []Check{CheckSessionConsistent}},
		{"worker holds a stale assignment", func(s *Session) {
			s.ActiveWorkers[0].Assignment = "A.42"
		}, []Check{CheckSessionConsistent}},
		{"two workers for one task", func(s *Session) {
			s.ActiveWorkers = append(s.ActiveWorkers, s.ActiveWorkers[0])
		}, []Check{CheckSessionConsistent}},
		{"orphaned in-progress task", func(s *Session) {
			s.ActiveWorkers = nil
		}, []Check{CheckNoOrphans}},
		{"completed session with work left", func(s *Session) {
			s.Status = SessionCompleted
		}, []Check{CheckCompletion}},
		{"unknown role", func(s *Session) {
			s.Graph.specs = append([]TaskSpec(nil), s.Graph.specs...)
			s.Graph.specs[3].Role = "poet"
		}, []Check{CheckRoles}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := running.clone()
			s.Graph = s.Graph.clone()
			s.ActiveWorkers = append([]ActiveWorker(nil), s.ActiveWorkers...)
			tc.mutate(s)
			var got []Check
			for _, v := range c.Validate(s) {
				got = append(got, v.Check)
				assert.NotEmpty(t, v.String())
			}
			assert.Equal(t, tc.want, got)
		})
	}

	specs, _ := PipelineTasks(ModeFullstack)
	partial, err := c.NewSession("s", ModeFullstack, specs[:3], t0)
	require.NoError(t, err)
	vs := c.Validate(partial)
	require.Len(t, vs, 1)
	assert.Equal(t, CheckCompleteness, vs[0].Check)
	assert.Contains(t, vs[0].Detail, "TEST-001, QA-FE-001, REVIEW-001")

	// A worker whose task finished but whose callback is not processed
	// yet is normal, not a violation.
	a, _ := running.Graph.Task("A")
	done, _, err := c.Update(running, TaskUpdate{Task: "A", To: Completed, Assignment: a.Assignment})
	require.NoError(t, err)
	assert.Empty(t, c.Validate(done))
}

func TestViolationsAreReported(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	s = s.clone()
	s.ActiveWorkers = append(s.ActiveWorkers, ActiveWorker{Task: "Z", Role: "tester", Assignment: "Z.1"})
	_, res := handle(t, c, s, WakeUp{Handler: HandleCallback, Role: "analyst"})
	require.NotEmpty(t, res.Violations)
	last := res.Effects[len(res.Effects)-1]
	assert.Equal(t, NoteViolations, last.Note)
	assert.Contains(t, last.Text(), "session_consistent: active worker Z.1 (tester) names no task")
}

func TestWorkerForNoTaskIsReleased(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	bad := s.clone()
	bad.ActiveWorkers = append(bad.ActiveWorkers, ActiveWorker{Task: "Z", Role: "tester", Assignment: "Z.1"})

	n, res := handle(t, c, bad, WakeUp{Handler: HandleCallback, Assignment: "Z.1"})
	assert.Len(t, n.ActiveWorkers, 1)
	assert.Equal(t, StepIgnored, res.Outcome)
	assert.Equal(t, InProgress, status(t, n, "A"), "A is untouched")
	assert.Empty(t, res.Violations)

	n, res = handle(t, c, bad, WakeUp{Handler: HandleResume})
	assert.Len(t, n.ActiveWorkers, 1)
	assert.Equal(t, StepAllRunning, res.Outcome)
	assert.Empty(t, c.Validate(n))
}
