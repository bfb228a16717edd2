package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestAReviewRejectionGoesBackToTheBuilderWithTheFeedback(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withReviewer(t)
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	res := run(t, tm)
	require.Equal(t, 1, res.Merged, res.String())
	data, err := os.ReadFile(filepath.Join(f.repo, "A.txt"))
	require.NoError(t, err)
	assert.Equal(t, "reviewed\n", string(data), "the second build read the review")
	var verdicts []pipeline.Outcome
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventReviewed {
			verdicts = append(verdicts, e.Outcome)
			assert.Equal(t, "reviewer", e.Role)
		}
	}
	assert.Equal(t, []pipeline.Outcome{"REJECTED", "APPROVED"}, verdicts)
}

func TestTooManyRejectionsPauseTheStoryWithTheLastReview(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.withReviewer(t)
	f.touch(t, "A.picky")
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	res := run(t, tm)
	s := stateOf(res, "A")
	require.Equal(t, team.StoryPaused, s.State, res.String())
	assert.Equal(t, 2, s.Stage)
	assert.Contains(t, s.Pause.Message, "the review rejected the work")
	assert.Contains(t, s.Pause.Message, "please write REVIEW-FIX")
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 3, strings.Count(string(log), "A review reviewer"), "MaxReviewRejections (2) retried, the third escalates:\n%s", log)
	assert.Empty(t, trailers(t, f.repo))
}
