package ghsource_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/ghsource"
)

const token = "ghp_test"

var t0 = time.Date(2026, 11, 27, 9, 0, 0, 0, time.UTC)

func newFake(t *testing.T, clk foreman.Clock) *fakegithub.Server {
	t.Helper()
	gh := fakegithub.New(fakegithub.Config{Token: token, Clock: clk})
	t.Cleanup(gh.Close)
	return gh
}

func newSource(t *testing.T, gh *fakegithub.Server, clk foreman.Clock) *ghsource.Source {
	t.Helper()
	src, err := ghsource.New(ghsource.Config{Owner: gh.Owner(), Repo: gh.Repo(), Token: token, BaseURL: gh.BaseURL(),
		Clock: clk, WriteGap: -1})
	require.NoError(t, err)
	return src
}

func ids(stories []team.Story) map[foreman.ItemID][]foreman.ItemID {
	out := map[foreman.ItemID][]foreman.ItemID{}
	for _, s := range stories {
		out[s.ID] = s.After
	}
	return out
}

func TestLabelledIssuesBecomeStoriesWithTheirBlockers(t *testing.T) {
	ctx := context.Background()
	gh := newFake(t, nil)
	one := gh.CreateIssue("Parse the config", "Add config.Parse.", "foreman")
	two := gh.CreateIssue("Reload it", "Blocked by #1", "foreman", "enhancement")
	three := gh.CreateIssue("  Document\nit ", "Tasks:\n- [ ] #2\n- [x] #1\n```\nblocked by #99\n```", "foreman")
	four := gh.CreateIssue("Someone else's work", "not ours")
	five := gh.CreateIssue("Needs four", "blocked by: #4", "foreman")
	six := gh.CreateIssue("Done already", "", "foreman")
	gh.CloseIssue(six, "completed")
	seven := gh.CreateIssue("After six", "Blocked by #6 and #1", "foreman")
	gh.CreateIssue("Not labelled", "blocked by #1")
	src := newSource(t, gh, nil)

	lst, err := src.List(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, map[foreman.ItemID][]foreman.ItemID{
		"issue-1": nil,
		"issue-2": {"issue-1"},
		"issue-3": {"issue-2"},
		"issue-7": {"issue-1"},
	}, ids(lst.Stories), "five waits for the open, unlabelled four; six is closed")
	assert.Equal(t, "Document it", lst.Stories[2].Title)
	assert.Equal(t, "Add config.Parse.", lst.Stories[0].Body)
	assert.Empty(t, lst.Dropped)
	_, _, _, _ = one, two, three, seven

	gh.CloseIssue(four, "not_planned")
	lst, err = src.List(ctx, nil)
	require.NoError(t, err)
	assert.Contains(t, ids(lst.Stories), foreman.ItemID("issue-5"), "its blocker closed: five is listed")
	_ = five
}

// TestAPollThatFindsNothingNewCostsNoRateLimit: the second List sends the
// ETags it got; the fake answers 304, which GitHub does not charge.
func TestAPollThatFindsNothingNewCostsNoRateLimit(t *testing.T) {
	ctx := context.Background()
	gh := newFake(t, nil)
	gh.CreateIssue("One", "", "foreman")
	gh.CreateIssue("Two", "blocked by #3", "foreman")
	gh.CreateIssue("Three, unlabelled", "")
	src := newSource(t, gh, nil)
	first, err := src.List(ctx, nil)
	require.NoError(t, err)
	charged := gh.Stats().Charged
	require.Equal(t, 2, charged, "the list and the unlabelled blocker")

	second, err := src.List(ctx, nil)
	require.NoError(t, err)
	assert.Equal(t, first, second)
	st := gh.Stats()
	assert.Equal(t, charged, st.Charged, "304s are not charged")
	assert.Equal(t, 2, st.NotModified)
	assert.Equal(t, 2, src.Stats().NotModified)
	assert.Equal(t, 2, st.ByRoute["GET /repos/{owner}/{repo}/issues"], "one conditional request per poll for the list")

	gh.CreateIssue("Four", "", "foreman")
	third, err := src.List(ctx, nil)
	require.NoError(t, err)
	assert.Len(t, third.Stories, 2)
}

func TestWithdrawnStoriesAreDropped(t *testing.T) {
	ctx := context.Background()
	gh := newFake(t, nil)
	for range 5 {
		gh.CreateIssue("Story", "", "foreman")
	}
	src := newSource(t, gh, nil)
	gh.SetLabels(1, "bug")        // the label removed
	gh.CloseIssue(2, "completed") // closed
	gh.DeleteIssue(3)             // gone
	gh.SetLabels(4, "foreman", "bug")
	lst, err := src.List(ctx, []foreman.ItemID{"issue-1", "issue-2", "issue-3", "issue-4", "US-001", "issue-x"})
	require.NoError(t, err)
	require.Len(t, lst.Dropped, 3)
	assert.Equal(t, team.Dropped{Story: "issue-1", Cause: "issue #1 lost its label foreman before the story started"}, lst.Dropped[0])
	assert.Equal(t, team.Dropped{Story: "issue-2", Cause: "issue #2 was closed (completed) before the story started", Unblock: true}, lst.Dropped[1])
	assert.Equal(t, team.Dropped{Story: "issue-3", Cause: "issue #3 is gone"}, lst.Dropped[2])
	assert.Equal(t, map[foreman.ItemID][]foreman.ItemID{"issue-4": nil, "issue-5": nil}, ids(lst.Stories))
}

// TestRateLimitsAreWaitedOutOnTheClock: a spent primary limit is waited
// out until its reset, a secondary one for its Retry-After, on the fake
// clock; nothing fails.
func TestRateLimitsAreWaitedOutOnTheClock(t *testing.T) {
	tests := []struct {
		name  string
		limit func(gh *fakegithub.Server, clk *foreman.FakeClock)
		wait  time.Duration
	}{
		{"primary", func(gh *fakegithub.Server, clk *foreman.FakeClock) { gh.SetRateLimit(0, clk.Now().Add(10*time.Minute)) }, 10 * time.Minute},
		{"secondary 403", func(gh *fakegithub.Server, _ *foreman.FakeClock) {
			gh.Throttle(1, http.StatusForbidden, 30*time.Second)
		}, 30 * time.Second},
		{"secondary 429", func(gh *fakegithub.Server, _ *foreman.FakeClock) {
			gh.Throttle(1, http.StatusTooManyRequests, 45*time.Second)
		}, 45 * time.Second},
		{"secondary, no time named", func(gh *fakegithub.Server, _ *foreman.FakeClock) { gh.Throttle(2, http.StatusForbidden, 0) }, 3 * time.Minute},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			clk := foreman.NewFakeClock(t0)
			gh := newFake(t, clk)
			gh.CreateIssue("One", "", "foreman")
			src := newSource(t, gh, clk)
			tc.limit(gh, clk)
			done := make(chan error, 1)
			var lst team.Listing
			go func() {
				var err error
				lst, err = src.List(ctx, nil)
				done <- err
			}()
			var waited time.Duration
			for waited < tc.wait {
				require.NoError(t, clk.BlockUntil(ctx, 1))
				next, ok := clk.NextDeadline()
				require.True(t, ok)
				d := next.Sub(clk.Now())
				select {
				case err := <-done:
					t.Fatalf("List returned after %v of %v: %v", waited, tc.wait, err)
				default:
				}
				clk.Advance(d)
				waited += d
			}
			require.NoError(t, <-done)
			assert.Len(t, lst.Stories, 1)
			assert.Equal(t, tc.wait, waited)
			assert.GreaterOrEqual(t, src.Stats().Waited, tc.wait)
			assert.GreaterOrEqual(t, gh.Stats().Limited, 1)
		})
	}
}

// TestAReportIsPostedOnce: the same report asked again (a host killed
// between posting and recording it, a fresh Source with nothing in
// memory) finds its comment by the marker and posts nothing.
func TestAReportIsPostedOnce(t *testing.T) {
	ctx := context.Background()
	gh := newFake(t, nil)
	n := gh.CreateIssue("One", "", "foreman")
	started := team.StoryReport{Story: "issue-1", Kind: team.ReportStarted, Key: "started"}
	require.NoError(t, newSource(t, gh, nil).Report(ctx, started))
	require.NoError(t, newSource(t, gh, nil).Report(ctx, started))
	is := gh.Issue(n)
	require.Len(t, is.Comments, 1)
	assert.Contains(t, is.Comments[0], "<!-- foreman:issue-1:started -->")
	assert.ElementsMatch(t, []string{"foreman", "foreman:working"}, is.Labels)

	// A cause that carries a marker of its own (an agent's output) does
	// not pass for the merge's comment.
	src := newSource(t, gh, nil)
	require.NoError(t, src.Report(ctx, team.StoryReport{Story: "issue-1", Kind: team.ReportPaused, Key: "paused-7",
		Cause: "gate failed\n<!-- foreman:issue-1:merged -->"}))
	require.NoError(t, src.Report(ctx, team.StoryReport{Story: "issue-1", Kind: team.ReportMerged, Key: "merged", Commit: "abc123"}))
	require.NoError(t, src.Report(ctx, team.StoryReport{Story: "US-001", Kind: team.ReportMerged, Key: "merged"}), "not this source's")
	is = gh.Issue(n)
	require.Len(t, is.Comments, 3)
	assert.Contains(t, is.Comments[1], "> gate failed")
	assert.Contains(t, is.Comments[2], "merged as abc123")
	assert.Equal(t, "closed", is.State)
	assert.Equal(t, "completed", is.StateReason)
	assert.ElementsMatch(t, []string{"foreman", "foreman:merged"}, is.Labels)
}

func TestConfigAndSpec(t *testing.T) {
	cfg, err := ghsource.ParseSpec("github:acme/app?label=agents")
	require.NoError(t, err)
	assert.Equal(t, ghsource.Config{Owner: "acme", Repo: "app", Label: "agents"}, cfg)
	for _, bad := range []string{"gitlab:acme/app", "github:acme", "github:acme/app?lable=x", "github:a b/c"} {
		_, err := ghsource.ParseSpec(bad)
		assert.ErrorIs(t, err, ghsource.ErrInvalidConfig, bad)
	}
	_, err = ghsource.New(ghsource.Config{Owner: "acme", Repo: "app"})
	assert.ErrorIs(t, err, ghsource.ErrInvalidConfig, "no token")
	_, err = ghsource.New(ghsource.Config{Owner: "acme", Repo: "app", Token: "x", BaseURL: "http://ghe.example.com/api/v3/"})
	assert.ErrorIs(t, err, ghsource.ErrInvalidConfig, "a token in clear")
	assert.True(t, strings.HasPrefix(ghsource.TokenEnv, "GITHUB"))

	t.Setenv(ghsource.TokenEnv, "ghp_secret")
	assert.Equal(t, "ghp_secret", ghsource.TakeToken())
	_, still := os.LookupEnv(ghsource.TokenEnv)
	assert.False(t, still, "the token left the environment")
}
