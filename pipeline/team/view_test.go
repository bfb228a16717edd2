package team_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
)

// viewChecker compares, after every write that changes the status view,
// the view with the full read it replaced (every story's records, one
// query each), the view records in the store (what ReadStatus reads) with
// the view, and the view's counts with the stories.
type viewChecker struct {
	t      *testing.T
	mu     sync.Mutex
	checks int
	bad    []string
}

func (c *viewChecker) watch(tm *team.Team) {
	team.OnViewCommit(tm, func() { c.check(tm, "after a write") })
}

func (c *viewChecker) check(tm *team.Team, when string) {
	ctx := context.Background()
	view := team.ViewStatuses(tm)
	old, err := team.OldStatuses(tm, ctx)
	persisted, perr := team.PersistedView(tm, ctx)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.checks++
	if err != nil || perr != nil {
		c.bad = append(c.bad, fmt.Sprintf("%s: reading: %v %v", when, err, perr))
		return
	}
	v, o, p := jsonOf(c.t, view), jsonOf(c.t, old), jsonOf(c.t, persisted)
	if v != o {
		c.bad = append(c.bad, fmt.Sprintf("%s: the view differs from the full read:\nview: %s\nread: %s", when, v, o))
	}
	if v != p {
		c.bad = append(c.bad, fmt.Sprintf("%s: the view records differ from the view:\nview:   %s\nstored: %s", when, v, p))
	}
	byState, n, tokens, cost := team.ViewCounts(tm)
	refused := team.ViewRefused(tm)
	want := map[team.StoryState]int{}
	var wantTokens, wantRefused int64
	var wantCost float64
	for _, s := range old {
		want[s.State]++
		wantTokens += s.Tokens
		wantCost += s.CostUSD
		wantRefused += s.Refused
	}
	if fmt.Sprint(byState) != fmt.Sprint(want) || n != len(old) || tokens != wantTokens || cost != wantCost || refused != wantRefused {
		c.bad = append(c.bad, fmt.Sprintf("%s: counts %v %d %d %v %d, want %v %d %d %v %d", when, byState, n, tokens, cost, refused,
			want, len(old), wantTokens, wantCost, wantRefused))
	}
}

func (c *viewChecker) done() {
	c.mu.Lock()
	defer c.mu.Unlock()
	require.Empty(c.t, c.bad, "%d checks", c.checks)
	c.t.Logf("the view equalled the full read after each of %d writes", c.checks)
}

func jsonOf(t *testing.T, v any) string {
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

// The status view equals the full read of the store after every write of
// a run with pauses, a blocked chain, a failed gate and its rework, a
// refused report, decisions (retry, skip, abandon), merges, and a restart
// of the host (the view rebuilt from the store on open), and ReadStatus
// returns it.
func TestStatusViewEqualsTheFullReadThroughARun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.fail-stage-1") // pauses; B and C wait behind it
	f.touch(t, "E.fail-stage-2") // pauses; F waits, then both are skipped/abandoned
	f.touch(t, "G.bad")          // fails the gate once, then passes with the feedback
	f.touch(t, "H.nochange")     // would pause: a build with nothing in it
	f.touch(t, "H.forged")       // pauses first: its plan's result file names another assignment (refused, counted)
	f.cfg.Workers = 3
	ctx := context.Background()
	c := &viewChecker{t: t}
	tm := f.newTeam(t)
	c.watch(tm)
	require.NoError(t, tm.Add(ctx,
		team.Story{ID: "A", Title: "a"},
		team.Story{ID: "B", Title: "b", After: []foreman.ItemID{"A"}},
		team.Story{ID: "C", Title: "c", After: []foreman.ItemID{"B"}},
		team.Story{ID: "D", Title: "d"},
		team.Story{ID: "E", Title: "e"},
		team.Story{ID: "F", Title: "f", After: []foreman.ItemID{"E", "D"}},
		team.Story{ID: "G", Title: "g"},
		team.Story{ID: "H", Title: "h"},
	))
	res := run(t, tm)
	require.Equal(t, 3, res.Paused, res.String())
	require.Equal(t, 3, res.Blocked, res.String())
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, team.StoryBlocked, storyIn(st.Stories, "C").State, "blocked through B")
	assert.Equal(t, []foreman.ItemID{"B"}, storyIn(st.Stories, "C").BlockedBy)

	// A restart: the view is rebuilt from the store and equals it.
	require.NoError(t, tm.Close())
	tm = f.newTeam(t)
	c.check(tm, "after the restart")
	c.watch(tm)
	require.NoError(t, os.Remove(filepath.Join(f.ctl, "A.fail-stage-1")))
	require.NoError(t, tm.Resolve(ctx, "A", team.Retry, "the flake is gone"))
	require.NoError(t, tm.Resolve(ctx, "E", team.Abandon, ""))
	require.NoError(t, tm.Resolve(ctx, "H", team.Skip, "done by hand"))
	one, err := tm.StatusOf(ctx, "A")
	require.NoError(t, err)
	assert.Equal(t, team.Retry, one.Decision)
	res = run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "C").State, res.String())
	assert.Equal(t, team.StoryAbandoned, stateOf(res, "E").State)
	assert.Equal(t, team.StoryBlocked, stateOf(res, "F").State)
	assert.Equal(t, team.StorySkipped, stateOf(res, "H").State)

	sum, err := tm.Summary(ctx)
	require.NoError(t, err)
	assert.Equal(t, 8, sum.Stories)
	assert.Equal(t, map[team.StoryState]int{team.StoryMerged: 5, team.StoryAbandoned: 1, team.StoryBlocked: 1, team.StorySkipped: 1}, sum.ByState)
	read, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	st, err = tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, jsonOf(t, st.Stories), jsonOf(t, read.Stories))
	assert.Equal(t, st.Graph, read.Graph)
	_, err = tm.StatusOf(ctx, "NOPE")
	assert.ErrorIs(t, err, team.ErrUnknownStory)
	c.done()
}

// A decision written by another process (a person's Resolve from another
// terminal) reaches this process's Status: its write moves the view's
// summary, and the view is read again.
func TestStatusSeesAnotherProcessesDecision(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.fail-stage-1")
	ctx := context.Background()
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b", After: []foreman.ItemID{"A"}}))
	require.Equal(t, 1, run(t, tm).Paused)

	other := f.newTeam(t) // its own store connection, as another process has
	require.NoError(t, other.Resolve(ctx, "A", team.Skip, "by hand"))
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, team.StorySkipped, storyIn(st.Stories, "A").State)
	assert.Equal(t, team.StoryPending, storyIn(st.Stories, "B").State, "no longer blocked")
	res := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "B").State, res.String())
}

func storyIn(stories []team.StoryStatus, id foreman.ItemID) team.StoryStatus {
	for _, s := range stories {
		if s.ID == id {
			return s
		}
	}
	return team.StoryStatus{}
}
