package team_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/team"
)

func TestReadStatusWithoutAnAgentWhileTheTeamRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	assert.ErrorIs(t, err, team.ErrNoState)

	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b"}))
	sub := tm.Subscribe(ctx, 0)
	done := make(chan team.Result)
	go func() { done <- run(t, tm) }()
	for e := range sub {
		if e.Kind == team.EventStageFinished {
			// Another reader (here the same process, through its own
			// read-only connection) sees the story at work.
			st, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
			require.NoError(t, err)
			require.Len(t, st.Stories, 2)
			assert.Contains(t, []team.StoryState{team.StoryRunning, team.StoryMerged}, st.Stories[0].State)
			break
		}
	}
	res := <-done
	require.Equal(t, 2, res.Merged, res.String())
	st, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	for _, s := range st.Stories {
		assert.Equal(t, team.StoryMerged, s.State)
	}
	assert.Contains(t, st.Text(), "merged as")
}
