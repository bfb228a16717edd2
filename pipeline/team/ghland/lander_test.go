package ghland_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/pipeline"
)

// TestAStoryLandsThroughOnePullRequest: Merge pushes the story and opens
// its pull request at once; Watch waits for the check (queued, in
// progress, completed), for GitHub to compute mergeability, and squash-
// merges; the local main gets the merge. A second Merge (a restart)
// answers Already and opens nothing.
func TestAStoryLandsThroughOnePullRequest(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}, MergeableAfter: 2})
	w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, nil)
	out, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	assert.Equal(t, pipeline.MergeOutcome{Landing: true}, out)
	pulls := w.gh.Pulls()
	require.Len(t, pulls, 1)
	pr := pulls[0]
	assert.Equal(t, "Add one", pr.Title)
	assert.Equal(t, "foreman/US-1", pr.Head)
	assert.Contains(t, pr.Body, "\nForeman-Item: US-1\n")
	n, err := l.PullRequest("US-1")
	require.NoError(t, err)
	assert.Equal(t, pr.Number, n, "recorded")

	var r reports
	ticks := w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	evs := r.all()
	require.Len(t, evs, 1)
	assert.Equal(t, pipeline.EventMerged, evs[0].ev.Kind)
	merged := w.gh.Pull(pr.Number)
	assert.True(t, merged.Merged)
	assert.Equal(t, merged.MergeCommit, evs[0].ev.Commit)
	msg := git(t, w.remote, "log", "-1", "--format=%B", "main")
	assert.True(t, strings.HasPrefix(msg, fmt.Sprintf("Add one (#%d)", pr.Number)), msg)
	assert.Contains(t, msg, "Foreman-Item: US-1", "the merge commit carries the trailer")
	assert.Equal(t, merged.MergeCommit, git(t, w.local, "rev-parse", "main"), "the local main has the merge")
	assert.Equal(t, "one", git(t, w.local, "show", "main:one.txt"))
	t.Logf("landed after %d poll intervals", ticks)

	again, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	assert.Equal(t, pipeline.MergeOutcome{Commit: merged.MergeCommit, Already: true}, again)
	assert.Len(t, w.gh.Pulls(), 1)
	st := w.gh.Stats()
	t.Logf("REST calls for one landed story: %d (%d not modified); %v", st.Requests, st.NotModified, st.ByRoute)
}
