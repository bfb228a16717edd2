package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
)

// TestThePlanLandsThroughPullRequests: -land pr pushes each story to a
// real bare remote and lands it through one pull request on the fake
// GitHub; the local main gets every merge, trailer and all; a rerun opens
// nothing new.
func TestThePlanLandsThroughPullRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	remote := filepath.Join(t.TempDir(), "remote.git")
	f.git(t, "clone", "-q", "--bare", f.repo, remote)
	gh := fakegithub.New(fakegithub.Config{Token: "ghs_land", GitDir: remote, Checks: []string{"test"}})
	defer gh.Close()
	args := append(f.runArgs(), "-land", "pr:octocat/Hello-World?remote="+remote+"&interval=20ms", "-github-api", gh.BaseURL())
	cmd, stdout, stderr := f.command(t, args...)
	cmd.Env = append(cmd.Env, "GITHUB_TOKEN=ghs_land")
	err := cmd.Run()
	require.Equal(t, exitMerged, exitCode(t, err), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	pulls := gh.Pulls()
	require.Len(t, pulls, 3, "one pull request per story")
	for _, p := range pulls {
		assert.True(t, p.Merged, "#%d %s", p.Number, p.Title)
		assert.Contains(t, p.Body, "Gate results: ", "#%d", p.Number)
	}
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t), "the local main has the merges")
	assert.Contains(t, stdout.String(), "3 merged, 0 paused")
	assert.Contains(t, stdout.String(), "pull requests: ")

	cmd, stdout, stderr = f.command(t, args...)
	cmd.Env = append(cmd.Env, "GITHUB_TOKEN=ghs_land")
	require.Equal(t, exitMerged, exitCode(t, cmd.Run()), "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.Len(t, gh.Pulls(), 3, "nothing opened again")
	assert.Equal(t, 3, gh.Stats().ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "nothing merged again")
}

func TestLandFlagIsChecked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	for _, land := range []string{"pr", "pr:octocat", "prx", "pr:a/b?colour=red", "pr:a/b?interval=soon"} {
		code, _, stderr := f.foreman(t, append(f.runArgs(), "-land", land)...)
		assert.Equal(t, exitUsage, code, land)
		assert.Contains(t, stderr, "-land", land)
	}
	out, err := exec.Command(binary, "-h").CombinedOutput()
	require.NoError(t, err)
	assert.True(t, strings.Contains(string(out), "-land string") && strings.Contains(string(out), "pull request"), "-h documents -land")
}
