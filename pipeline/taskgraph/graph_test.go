package taskgraph

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
)

func spec(subject, role string, blockedBy ...string) TaskSpec {
	return TaskSpec{Subject: subject, Role: role, BlockedBy: blockedBy}
}

func TestNewGraphRejectsCycles(t *testing.T) {
	cases := []struct {
		name  string
		specs []TaskSpec
		cycle []string
	}{
		{"self", []TaskSpec{spec("A", "tester", "A")}, []string{"A"}},
		{"two", []TaskSpec{spec("A", "tester", "B"), spec("B", "tester", "A")}, []string{"A", "B"}},
		{"three behind a root", []TaskSpec{
			spec("ROOT", "planner"),
			spec("A", "tester", "ROOT", "C"),
			spec("B", "tester", "A"),
			spec("C", "tester", "B"),
		}, []string{"A", "C", "B"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := NewGraph(nil, tc.specs...)
			var ce *CycleError
			require.ErrorAs(t, err, &ce)
			assert.ErrorIs(t, err, ErrCycle)
			assert.Equal(t, tc.cycle, ce.Cycle)
			assert.Contains(t, err.Error(), strings.Join(tc.cycle, " -> "))
		})
	}
}

func TestGraphAddRejectsCycleAmongNewTasks(t *testing.T) {
	g, err := NewGraph(nil, spec("A", "planner"))
	require.NoError(t, err)
	_, err = g.Add(nil, spec("B", "tester", "A", "C"), spec("C", "tester", "B"))
	assert.ErrorIs(t, err, ErrCycle)
	assert.Equal(t, 1, g.Len(), "g is unchanged")
	g2, err := g.Add(nil, spec("B", "tester", "A"))
	require.NoError(t, err)
	assert.Equal(t, 2, g2.Len())
	assert.Equal(t, 1, g.Len())
}

func TestNewGraphRejectsBadTasks(t *testing.T) {
	_, err := NewGraph(nil, spec("A", "tester", "NOPE"))
	var ub *UnknownBlockerError
	require.ErrorAs(t, err, &ub)
	assert.Equal(t, UnknownBlockerError{Task: "A", Blocker: "NOPE"}, *ub)
	assert.ErrorIs(t, err, ErrUnknownBlocker)

	_, err = NewGraph(nil, spec("A", "poet"))
	var ur *UnknownRoleError
	require.ErrorAs(t, err, &ur)
	assert.Equal(t, "poet", ur.Role)
	assert.ErrorIs(t, err, ErrUnknownRole)

	_, err = NewGraph([]string{"poet"}, spec("A", "poet"))
	assert.NoError(t, err, "a configured role set replaces the default")
	_, err = NewGraph([]string{"poet"}, spec("A", "tester"))
	assert.ErrorIs(t, err, ErrUnknownRole)

	_, err = NewGraph(nil, spec("A", "tester"), spec("A", "tester"))
	var dup *DuplicateTaskError
	require.ErrorAs(t, err, &dup)
	assert.ErrorIs(t, err, ErrDuplicateTask)

	for _, bad := range []string{"", "../x", "-a", "a b", "x.lock", strings.Repeat("A", MaxSubjectLen+1)} {
		_, err = NewGraph(nil, spec(bad, "tester"))
		assert.ErrorIs(t, err, foreman.ErrInvalidID, "%q", bad)
	}
	_, err = NewGraph(nil, spec(strings.Repeat("A", MaxSubjectLen), "tester"))
	assert.NoError(t, err)
}

func TestGraphDeduplicatesBlockers(t *testing.T) {
	g, err := NewGraph(nil, spec("A", "planner"), spec("B", "tester", "A", "A"))
	require.NoError(t, err)
	b, _ := g.Task("B")
	assert.Equal(t, []string{"A"}, b.BlockedBy)
}

// withStatus returns a graph whose tasks have the given statuses.
func withStatus(t *testing.T, specs []TaskSpec, st map[string]Status) *Graph {
	t.Helper()
	g, err := NewGraph(nil, specs...)
	require.NoError(t, err)
	for subject, s := range st {
		g.state[g.index[subject]].Status = s
	}
	return g
}

func TestReadyIsAnd(t *testing.T) {
	specs := []TaskSpec{spec("A", "planner"), spec("B", "planner"), spec("C", "tester", "A", "B")}
	cases := []struct {
		a, b  Status
		ready bool
	}{
		{Completed, Completed, true},
		{Completed, Pending, false},
		{Completed, InProgress, false},
		{Completed, Failed, false},
		{Completed, Cancelled, false},
		{Failed, Failed, false},
		{Cancelled, Cancelled, false},
	}
	for _, tc := range cases {
		g := withStatus(t, specs, map[string]Status{"A": tc.a, "B": tc.b})
		assert.Equal(t, tc.ready, g.IsReady("C"), "A %s, B %s", tc.a, tc.b)
	}
	g := withStatus(t, specs, map[string]Status{"A": Completed, "B": Completed, "C": InProgress})
	assert.False(t, g.IsReady("C"), "only a pending task is ready")
	assert.False(t, g.IsReady("NOPE"))
	assert.Equal(t, []string{"A", "B"}, withStatus(t, specs, nil).Ready())
}

func TestBlockedSaysWhy(t *testing.T) {
	specs := []TaskSpec{spec("A", "planner"), spec("B", "planner"), spec("C", "tester", "A", "B"), spec("D", "tester")}
	g := withStatus(t, specs, map[string]Status{"A": Failed, "B": Completed, "D": Cancelled})
	assert.Equal(t, []BlockedTask{
		{Task: "A", Status: Failed},
		{Task: "C", Status: Pending, Blockers: []BlockerStatus{{Task: "A", Status: Failed}}},
	}, g.Blocked())
	assert.Equal(t, "C blocked by A (failed)", g.Blocked()[1].String())
	assert.Equal(t, "A (failed)", g.Blocked()[0].String())
}

func TestGraphAccessorsCopy(t *testing.T) {
	g, err := NewGraph(nil, spec("A", "planner"), spec("B", "tester", "A"))
	require.NoError(t, err)
	tasks := g.Tasks()
	tasks[1].BlockedBy[0] = "X"
	tasks[0].Status = Completed
	b, ok := g.Task("B")
	require.True(t, ok)
	assert.Equal(t, []string{"A"}, b.BlockedBy)
	assert.Equal(t, 0, g.Count(Completed))
	_, ok = g.Task("Z")
	assert.False(t, ok)
}

func TestPipelineTasks(t *testing.T) {
	counts := map[Mode]int{ModeSpecOnly: 12, ModeImplOnly: 4, ModeFEOnly: 3, ModeFullstack: 6, ModeFullLifecycle: 16, ModeFullLifecycleFE: 18}
	for mode, n := range counts {
		specs, ok := PipelineTasks(mode)
		require.True(t, ok, mode)
		assert.Len(t, specs, n, mode)
		_, err := NewGraph(nil, specs...)
		assert.NoError(t, err, mode)
	}
	full, _ := PipelineTasks(ModeFullLifecycle)
	g, _ := NewGraph(nil, full...)
	plan, _ := g.Task("PLAN-001")
	assert.Equal(t, []string{"DISCUSS-006"}, plan.BlockedBy)
	_, ok := PipelineTasks("custom")
	assert.False(t, ok)
}
