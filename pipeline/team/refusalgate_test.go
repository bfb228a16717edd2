package team_test

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/team"
)

// By default a story whose agent was refused does not land on its own: it
// pauses before its merge with its refusals as the cause, the story beside
// it lands, and a person's Resume lands it. A story that is not paused is
// not resolved.
func TestAStoryWhoseAgentWasRefusedWaitsForAPersonBeforeItLands(t *testing.T) {
	ctx := context.Background()
	tm, repo, _ := writerTeam(t, false)

	res := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "HONEST").State, res.String())
	w := stateOf(res, "WRITER")
	require.Equal(t, team.StoryPaused, w.State, res.String())
	require.NotNil(t, w.Pause)
	assert.Contains(t, w.Pause.Message, "its agents were refused 4 time(s) since a person last looked (the last: the OS sandbox: wrote")
	assert.Contains(t, w.Pause.Message, "Resume lands it as it is")
	assert.Equal(t, []string{"HONEST"}, trailers(t, repo), "only the honest story landed")

	require.ErrorIs(t, tm.Resolve(ctx, "HONEST", team.Resume, ""), team.ErrNotPaused, "a merged story is not resolved")
	require.NoError(t, tm.Resolve(ctx, "WRITER", team.Resume, "looked at its diff: fine"))
	res = run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "WRITER").State, res.String())
	assert.ElementsMatch(t, []string{"HONEST", "WRITER"}, trailers(t, repo))
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.Refused, "still counted after it landed")
}
