package ghland_test

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
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

// TestAWaitingPullRequestCostsOneConditionalRequestPerInterval: while
// its checks run, each interval sends one request per open pull request
// (its check runs, or every third look the pull request itself),
// conditional: unchanged, it is a 304 that costs no rate limit. Its
// reviews are read when the pull request is first seen (and again only
// when it changes).
func TestAWaitingPullRequestCostsOneConditionalRequestPerInterval(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}, CheckReads: 20})
	w.story(t, "US-1", "one.txt", "one\n")
	w.story(t, "US-2", "two.txt", "two\n")
	l := w.lander(t, nil)
	for _, id := range []foreman.ItemID{"US-1", "US-2"} {
		_, err := l.Merge(ctx, pipeline.MergeRequest{Item: id, Title: "Add " + string(id)})
		require.NoError(t, err)
	}
	before := w.gh.Stats()
	var r reports
	const intervals = 15
	ticks := w.watch(t, l, &r, intervals, func() bool { return false })
	require.Equal(t, intervals, ticks)
	require.Empty(t, r.all(), "still waiting")
	after := w.gh.Stats()
	looks := intervals + 1 // Watch looks at once, then every interval
	sent := after.Requests - before.Requests
	perPR := float64(sent) / float64(2*looks)
	byRoute := map[string]int{}
	for route, n := range after.ByRoute {
		if d := n - before.ByRoute[route]; d != 0 {
			byRoute[route] = d
		}
	}
	t.Logf("%d looks at 2 waiting pull requests: %d requests (%.2f per pull request per interval), %d answered 304, %d charged; by route %v",
		looks, sent, perPR, after.NotModified-before.NotModified, after.Charged-before.Charged, byRoute)
	lookups := byRoute["GET /repos/{owner}/{repo}/commits/{ref}/check-runs"] + byRoute["GET /repos/{owner}/{repo}/pulls/{pull_number}"]
	assert.Equal(t, 2*looks, lookups, "one request per interval per open pull request")
	assert.Equal(t, 2, byRoute["GET /repos/{owner}/{repo}/pulls/{pull_number}/reviews"], "each pull request's reviews read once")
	assert.Equal(t, 2*looks+2, sent, "nothing else")
	assert.Greater(t, after.NotModified-before.NotModified, sent/2, "most are 304s")
}

// TestMethodWaitLeavesTheMergeToTheQueue: with MethodWait the lander
// never merges; once the repository's merge queue has, the story is
// merged with the queue's commit.
func TestMethodWaitLeavesTheMergeToTheQueue(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}})
	w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, func(c *ghland.Config) { c.Method = ghland.MethodWait })
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	n, _ := l.PullRequest("US-1")
	var r reports
	w.watch(t, l, &r, 8, func() bool { return false })
	assert.Empty(t, r.all(), "waits for the queue")
	assert.Zero(t, w.gh.Stats().ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "never merges itself")

	queue := github.NewClient(nil).WithAuthToken("ghs_test")
	queue.BaseURL, err = url.Parse(w.gh.BaseURL())
	require.NoError(t, err)
	res, _, err := queue.PullRequests.Merge(ctx, w.gh.Owner(), w.gh.Repo(), n, "", &github.PullRequestOptions{MergeMethod: "merge"})
	require.NoError(t, err)
	w.watch(t, l, &r, 8, func() bool { return len(r.all()) > 0 })
	require.Len(t, r.all(), 1)
	assert.Equal(t, pipeline.Event{Kind: pipeline.EventMerged, Commit: res.GetSHA()}, r.all()[0].ev)
}

// TestRateLimitsAreWaitedOutWhileLanding: a secondary rate limit's 429
// in the middle of a landing is waited out on the clock (the transport
// ghsource uses too), and the landing goes on.
func TestRateLimitsAreWaitedOutWhileLanding(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}})
	w.story(t, "US-1", "one.txt", "one\n")
	l := w.lander(t, nil)
	_, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	require.NoError(t, err)
	w.gh.Throttle(1, http.StatusTooManyRequests, 25*time.Second)
	start := w.clk.Now()
	var r reports
	w.watch(t, l, &r, 20, func() bool { return len(r.all()) > 0 })
	require.Len(t, r.all(), 1)
	assert.Equal(t, pipeline.EventMerged, r.all()[0].ev.Kind)
	st := l.Stats()
	assert.Equal(t, 1, st.Limited)
	assert.Equal(t, 25*time.Second, st.Waited, "Retry-After, on the clock")
	assert.GreaterOrEqual(t, w.clk.Now().Sub(start), 25*time.Second)
}

// TestCheckReadsTheRepositoryOnce: Check sends one GET of the repository;
// it fails, matching ErrRepository, when the API cannot be reached or the
// repository does not allow the configured merge method.
func TestCheckReadsTheRepositoryOnce(t *testing.T) {
	ctx := context.Background()
	w := newWorld(t, fakegithub.Config{MergeMethods: []string{"merge"}})
	closed := fakegithub.New(fakegithub.Config{Token: "ghs_test"})
	unreachable := closed.BaseURL()
	closed.Close()
	for _, tc := range []struct {
		name, method, says string
		unreachable        bool
	}{
		{name: "reachable, method from the repository"},
		{name: "allowed method", method: "merge"},
		{name: "wait needs no method", method: ghland.MethodWait},
		{name: "method not allowed", method: "squash", says: "does not allow the squash merge method"},
		{name: "unreachable", unreachable: true, says: "connection refused"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := w.lander(t, func(c *ghland.Config) {
				c.Method = tc.method
				if tc.unreachable {
					c.BaseURL = unreachable
				}
			})
			err := l.Check(ctx)
			assert.Equal(t, 1, l.Stats().Requests)
			if tc.says == "" {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ghland.ErrRepository)
			assert.ErrorContains(t, err, tc.says)
		})
	}
}
