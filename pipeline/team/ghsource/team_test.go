package ghsource_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/pipeline/team"
)

// TestATeamWorksThroughLabelledIssues: issues on the fake GitHub become
// stories, a scripted agent builds them on a real repository, and each
// issue ends merged and closed with one comment per event; one whose
// label is removed before it starts is dropped with an event. The REST
// calls of the source's part are counted per story.
func TestATeamWorksThroughLabelledIssues(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	gh := newFake(t, nil)
	one := gh.CreateIssue("Add one", "Write one.", "foreman")
	two := gh.CreateIssue("Add two", "Blocked by #1", "foreman")
	three := gh.CreateIssue("Add three", "- [ ] #2", "foreman")
	withdrawn := gh.CreateIssue("Not after all", "", "foreman")
	src := newSource(t, gh, nil)

	f := teamtest.New(t, "Ada")
	f.Config.Workers = 2
	tm, err := team.New(ctx, f.Config)
	require.NoError(t, err)
	defer tm.Close()
	fl := tm.Follow(src, team.FollowConfig{Interval: time.Hour})
	res, err := fl.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, []foreman.ItemID{"issue-1", "issue-2", "issue-3", "issue-4"}, res.Added)

	gh.SetLabels(withdrawn) // a person takes it back before it starts
	res, err = fl.Sync(ctx)
	require.NoError(t, err)
	assert.Equal(t, []foreman.ItemID{"issue-4"}, res.Dropped)
	res, err = fl.Sync(ctx)
	require.NoError(t, err)
	assert.Empty(t, res.Dropped, "dropped once")

	followCtx, stopFollowing := context.WithCancel(ctx)
	followed := make(chan error, 1)
	go func() { followed <- fl.Run(followCtx) }()
	out, err := tm.Run(ctx)
	require.NoError(t, err)
	stopFollowing()
	<-followed
	require.NoError(t, fl.Flush(ctx))
	assert.Equal(t, 3, out.Merged, out.String())
	assert.Equal(t, 1, out.Abandoned, "the dropped story")

	for _, n := range []int{one, two, three} {
		is := gh.Issue(n)
		assert.Equal(t, "closed", is.State, "#%d", n)
		assert.ElementsMatch(t, []string{"foreman", "foreman:merged"}, is.Labels, "#%d", n)
		require.Len(t, is.Comments, 2, "#%d: started and merged, once each", n)
		assert.Contains(t, is.Comments[0], "started working")
		assert.Contains(t, is.Comments[1], "is merged as")
	}
	w := gh.Issue(withdrawn)
	assert.Equal(t, "open", w.State)
	assert.Empty(t, w.Comments)

	var dropped []team.Event
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStoryDropped {
			dropped = append(dropped, e)
		}
	}
	require.Len(t, dropped, 1)
	assert.Equal(t, foreman.ItemID("issue-4"), dropped[0].Story)
	assert.Equal(t, "issue #4 lost its label foreman before the story started", dropped[0].Detail)
	st, err := tm.StatusOf(ctx, "issue-4")
	require.NoError(t, err)
	assert.Equal(t, team.StoryAbandoned, st.State)

	// A second Follower (a restarted host) reports nothing again.
	before := len(gh.Issue(one).Comments)
	require.NoError(t, tm.Follow(src, team.FollowConfig{}).Flush(ctx))
	assert.Equal(t, before, len(gh.Issue(one).Comments))

	stats := gh.Stats()
	t.Logf("REST calls for 3 merged stories and 1 dropped: %d sent, %d charged, %d not modified (304); by route: %v",
		stats.Requests, stats.Charged, stats.NotModified, stats.ByRoute)
	perStory := float64(stats.Requests) / 3
	t.Logf("REST calls per merged story, issue to merge (the source's part): %.1f", perStory)
	assert.LessOrEqual(t, perStory, 25.0)
}
