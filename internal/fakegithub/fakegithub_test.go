package fakegithub_test

import (
	"context"
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
)

func client(t *testing.T, gh *fakegithub.Server, token string) *github.Client {
	t.Helper()
	c := github.NewClient(nil)
	if token != "" {
		c = c.WithAuthToken(token)
	}
	var err error
	c.BaseURL, err = url.Parse(gh.BaseURL())
	require.NoError(t, err)
	return c
}

// TestTheFakeKeepsGitHubsSemantics, through go-github: 401 without the
// token, ETag and an uncharged 304, 422 for a label that exists, 404 for
// removing a label the issue lacks, the primary rate limit's 403.
func TestTheFakeKeepsGitHubsSemantics(t *testing.T) {
	ctx := context.Background()
	gh := fakegithub.New(fakegithub.Config{Token: "t"})
	defer gh.Close()
	n := gh.CreateIssue("Found a bug", "I'm having a problem with this.", "bug")

	_, _, err := client(t, gh, "wrong").Issues.Get(ctx, gh.Owner(), gh.Repo(), n)
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusUnauthorized, er.Response.StatusCode)

	c := client(t, gh, "t")
	is, resp, err := c.Issues.Get(ctx, gh.Owner(), gh.Repo(), n)
	require.NoError(t, err)
	assert.Equal(t, "Found a bug", is.GetTitle())
	assert.Equal(t, "bug", is.Labels[0].GetName())
	assert.Equal(t, "COLLABORATOR", is.GetAuthorAssociation())
	etag := resp.Header.Get("ETag")
	require.NotEmpty(t, etag)
	charged := gh.Stats().Charged
	req, err := c.NewRequest(http.MethodGet, "repos/octocat/Hello-World/issues/1", nil)
	require.NoError(t, err)
	req.Header.Set("If-None-Match", etag)
	resp, err = c.Do(ctx, req, nil)
	require.Error(t, err, "go-github reports a 304 as an error response")
	assert.Equal(t, http.StatusNotModified, resp.StatusCode)
	assert.Equal(t, charged, gh.Stats().Charged, "a 304 is not charged")
	assert.Equal(t, 1, gh.Stats().NotModified)

	_, _, err = c.Issues.CreateLabel(ctx, gh.Owner(), gh.Repo(), &github.Label{Name: github.Ptr("bug")})
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusUnprocessableEntity, er.Response.StatusCode)
	assert.Equal(t, "already_exists", er.Errors[0].Code)

	_, err = c.Issues.RemoveLabelForIssue(ctx, gh.Owner(), gh.Repo(), n, "nope")
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusNotFound, er.Response.StatusCode)

	gh.SetRateLimit(0, time.Now().Add(time.Hour))
	_, _, err = c.Issues.Get(ctx, gh.Owner(), gh.Repo(), n)
	var rl *github.RateLimitError
	require.ErrorAs(t, err, &rl)
	assert.Equal(t, 0, rl.Rate.Remaining)
}
