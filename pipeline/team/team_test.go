package team_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestTeamMergesAPlanInDependencyOrder(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.cfg.Workers = 2
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx,
		team.Story{ID: "US-002", Title: "second", Body: "after the first", After: []foreman.ItemID{"US-001"}},
		team.Story{ID: "US-001", Title: "first", Body: "write US-001.txt"},
		team.Story{ID: "US-003", Title: "third"},
	))
	res := run(t, tm)
	assert.Equal(t, 3, res.Merged, res.String())
	got := trailers(t, f.repo)
	require.Len(t, got, 3, "one squash commit per story")
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, got)
	require.NotEqual(t, -1, indexOf(got, "US-002"), "US-002 is on main")
	assert.Greater(t, indexOf(got, "US-001"), indexOf(got, "US-002"), "US-002 lands after US-001 (log is newest first)")

	st, err := tm.Status(ctx)
	require.NoError(t, err)
	for _, s := range st.Stories {
		assert.Equal(t, team.StoryMerged, s.State, s.ID)
		assert.NotEmpty(t, s.Commit)
	}
	assert.Contains(t, st.Text(), "merged as")

	kinds := map[team.EventKind]int{}
	var last uint64
	for _, e := range tm.Events(0) {
		assert.Equal(t, last+1, e.Seq)
		last = e.Seq
		kinds[e.Kind]++
	}
	assert.Equal(t, 3, kinds[team.EventStoryMerged])
	assert.Equal(t, 12, kinds[team.EventStageFinished], "4 stages of 3 stories")

	// A plan already merged finishes at once, and merges nothing again.
	res = run(t, tm)
	assert.Equal(t, 3, res.Merged)
	assert.Len(t, trailers(t, f.repo), 3)
}

func indexOf(s []string, v string) int {
	for i, x := range s {
		if x == v {
			return i
		}
	}
	return -1
}

func TestNewRefusesAnAgentThatCannotStart(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{"no-such-agent-binary-xyz", "{prompt}"}})
	_, err := team.New(context.Background(), f.cfg)
	require.Error(t, err)
	assert.ErrorIs(t, err, team.ErrAgentUnavailable)
	assert.ErrorIs(t, err, agentcmd.ErrAgentNotFound)
	assert.Contains(t, err.Error(), "no-such-agent-binary-xyz")
}

func TestAFailingAgentPausesItsStoryWithTheCauseAndBlocksItsDependents(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "US-001.fail-stage-0")
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx,
		team.Story{ID: "US-001", Title: "first"},
		team.Story{ID: "US-002", Title: "second", After: []foreman.ItemID{"US-001"}},
		team.Story{ID: "US-003", Title: "independent"},
	))
	res := run(t, tm)
	assert.Equal(t, 1, res.Merged, res.String())
	assert.Equal(t, 1, res.Paused)
	assert.Equal(t, 1, res.Blocked)
	paused := stateOf(res, "US-001")
	require.NotNil(t, paused.Pause)
	assert.Contains(t, paused.Pause.Message, "exited with status 3")
	assert.Contains(t, paused.Pause.Message, "boom 0")
	assert.Equal(t, []foreman.ItemID{"US-001"}, stateOf(res, "US-002").BlockedBy)

	// Resolving: unknown actions and stories are refused, a story that is
	// not paused too; a retry is recorded once (a double click).
	assert.ErrorIs(t, tm.Resolve(ctx, "US-001", "reboot", ""), team.ErrUnknownAction)
	assert.ErrorIs(t, tm.Resolve(ctx, "US-404", team.Retry, ""), team.ErrUnknownStory)
	assert.ErrorIs(t, tm.Resolve(ctx, "US-003", team.Retry, ""), team.ErrNotPaused)
	f.remove(t, "US-001.fail-stage-0")
	require.NoError(t, tm.Resolve(ctx, "US-001", team.Retry, "the agent is fixed"))
	require.NoError(t, tm.Resolve(ctx, "US-001", team.Retry, "the agent is fixed"))
	assert.ErrorIs(t, tm.Resolve(ctx, "US-001", team.Skip, ""), team.ErrNotPaused)

	res = run(t, tm)
	assert.Equal(t, 3, res.Merged, res.String())
	assert.Len(t, trailers(t, f.repo), 3)
	assert.ErrorIs(t, tm.Resolve(ctx, "US-001", team.Retry, ""), team.ErrNotPaused)
}

func TestAddRefusesBadPlansAndWritesNothing(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	cases := map[string]struct {
		stories []team.Story
		want    error
	}{
		"invalid id":       {[]team.Story{{ID: "../x", Title: "x"}}, foreman.ErrInvalidID},
		"empty title":      {[]team.Story{{ID: "B", Title: " "}}, team.ErrInvalidStory},
		"unknown after":    {[]team.Story{{ID: "B", Title: "b", After: []foreman.ItemID{"Z"}}}, team.ErrInvalidStory},
		"cycle":            {[]team.Story{{ID: "B", Title: "b", After: []foreman.ItemID{"C"}}, {ID: "C", Title: "c", After: []foreman.ItemID{"B"}}}, team.ErrInvalidStory},
		"changed story":    {[]team.Story{{ID: "A", Title: "another"}}, team.ErrStoryExists},
		"after itself":     {[]team.Story{{ID: "B", Title: "b", After: []foreman.ItemID{"B"}}}, team.ErrInvalidStory},
		"multi-line title": {[]team.Story{{ID: "B", Title: "b\nc"}}, team.ErrInvalidStory},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			err := tm.Add(ctx, c.stories...)
			require.Error(t, err)
			assert.True(t, errors.Is(err, c.want), err.Error())
			var se *team.StoryError
			assert.ErrorAs(t, err, &se)
			assert.Len(t, tm.Stories(), 1, "nothing added")
		})
	}
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}), "the same story again is a no-op")
}
