package fakegithub_test

import (
	"context"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-github/v84/github"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
)

func gitIn(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@x",
		"GIT_CONFIG_GLOBAL=/dev/null")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// bareWithBranch makes a bare repository with main and a branch "feature"
// one commit ahead of it.
func bareWithBranch(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	bare, work := filepath.Join(dir, "r.git"), filepath.Join(dir, "w")
	gitIn(t, dir, "init", "-q", "--bare", "-b", "main", bare)
	gitIn(t, dir, "init", "-q", "-b", "main", work)
	require.NoError(t, os.WriteFile(filepath.Join(work, "a"), []byte("a\n"), 0o644))
	gitIn(t, work, "add", "a")
	gitIn(t, work, "commit", "-qm", "a")
	gitIn(t, work, "push", "-q", bare, "main")
	gitIn(t, work, "checkout", "-qb", "feature")
	require.NoError(t, os.WriteFile(filepath.Join(work, "b"), []byte("b\n"), 0o644))
	gitIn(t, work, "add", "b")
	gitIn(t, work, "commit", "-qm", "b")
	gitIn(t, work, "push", "-q", bare, "feature")
	return bare
}

// TestPullRequestsKeepGitHubsSemantics, through go-github: 422 for a
// second pull request of a branch and for no commits between; mergeable
// null until GitHub has computed it; check runs from queued to completed;
// a job's log behind a 302; 409 for a stale head; 405 for a method the
// repository does not allow; a squash merge written into the repository.
func TestPullRequestsKeepGitHubsSemantics(t *testing.T) {
	ctx := context.Background()
	bare := bareWithBranch(t)
	gh := fakegithub.New(fakegithub.Config{Token: "t", GitDir: bare, Checks: []string{"build"}, MergeMethods: []string{"squash"},
		CI: func(_, _ string) fakegithub.CheckResult {
			return fakegithub.CheckResult{Conclusion: "failure", Title: "broken", Log: "line 1\nline 2\n"}
		}})
	defer gh.Close()
	c := client(t, gh, "t")
	own, repo := gh.Owner(), gh.Repo()
	pr, _, err := c.PullRequests.Create(ctx, own, repo, &github.NewPullRequest{Title: github.Ptr("B"), Head: github.Ptr("feature"), Base: github.Ptr("main")})
	require.NoError(t, err)
	assert.Nil(t, pr.Mergeable, "computed in the background")
	assert.Equal(t, "feature", pr.GetHead().GetRef())

	_, _, err = c.PullRequests.Create(ctx, own, repo, &github.NewPullRequest{Title: github.Ptr("B"), Head: github.Ptr(own + ":feature"), Base: github.Ptr("main")})
	var er *github.ErrorResponse
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusUnprocessableEntity, er.Response.StatusCode)
	assert.Equal(t, "A pull request already exists for octocat:feature.", er.Errors[0].Message)
	_, _, err = c.PullRequests.Create(ctx, own, repo, &github.NewPullRequest{Title: github.Ptr("M"), Head: github.Ptr("main"), Base: github.Ptr("main")})
	require.ErrorAs(t, err, &er)
	assert.Equal(t, "No commits between main and main", er.Errors[0].Message)

	got, _, err := c.PullRequests.Get(ctx, own, repo, pr.GetNumber())
	require.NoError(t, err)
	assert.True(t, got.GetMergeable(), "settled")
	assert.Equal(t, "clean", got.GetMergeableState())
	prs, _, err := c.PullRequests.List(ctx, own, repo, &github.PullRequestListOptions{Head: own + ":feature", State: "all"})
	require.NoError(t, err)
	require.Len(t, prs, 1)

	var statuses []string
	var run *github.CheckRun
	for range 3 {
		res, _, err := c.Checks.ListCheckRunsForRef(ctx, own, repo, got.GetHead().GetSHA(), nil)
		require.NoError(t, err)
		require.Equal(t, 1, res.GetTotal())
		run = res.CheckRuns[0]
		statuses = append(statuses, run.GetStatus())
	}
	assert.Equal(t, []string{"queued", "in_progress", "completed"}, statuses)
	assert.Equal(t, "failure", run.GetConclusion())
	assert.Equal(t, "broken", run.GetOutput().GetTitle())
	u, resp, err := c.Actions.GetWorkflowJobLogs(ctx, own, repo, run.GetID(), 0)
	require.NoError(t, err)
	assert.Equal(t, http.StatusFound, resp.StatusCode)
	logResp, err := http.Get(u.String()) // signed: no token
	require.NoError(t, err)
	body, _ := io.ReadAll(logResp.Body)
	logResp.Body.Close()
	assert.Equal(t, "line 1\nline 2\n", string(body))

	_, _, err = c.PullRequests.Merge(ctx, own, repo, pr.GetNumber(), "", &github.PullRequestOptions{MergeMethod: "merge"})
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusMethodNotAllowed, er.Response.StatusCode)
	_, _, err = c.PullRequests.Merge(ctx, own, repo, pr.GetNumber(), "", &github.PullRequestOptions{MergeMethod: "squash", SHA: "0000"})
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusConflict, er.Response.StatusCode)
	res, _, err := c.PullRequests.Merge(ctx, own, repo, pr.GetNumber(), "Trailer: x", &github.PullRequestOptions{MergeMethod: "squash", SHA: got.GetHead().GetSHA()})
	require.NoError(t, err)
	assert.True(t, res.GetMerged())
	assert.Equal(t, res.GetSHA(), gitIn(t, bare, "rev-parse", "main"))
	assert.Equal(t, "B (#1)\n\nTrailer: x", gitIn(t, bare, "log", "-1", "--format=%B", "main"))
	assert.Equal(t, "b", gitIn(t, bare, "show", "main:b"))
	merged, _, err := c.PullRequests.Get(ctx, own, repo, pr.GetNumber())
	require.NoError(t, err)
	assert.True(t, merged.GetMerged())
	assert.Equal(t, "closed", merged.GetState())
	assert.Equal(t, res.GetSHA(), merged.GetMergeCommitSHA())
	_, _, err = c.PullRequests.Merge(ctx, own, repo, pr.GetNumber(), "", &github.PullRequestOptions{MergeMethod: "squash"})
	require.ErrorAs(t, err, &er)
	assert.Equal(t, http.StatusMethodNotAllowed, er.Response.StatusCode, "merged once")
}
