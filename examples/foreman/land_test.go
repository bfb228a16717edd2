package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
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

// TestKilledWhileLandingThroughPullRequests: the reference binary, taking
// its stories from labelled issues and landing them through pull
// requests, is killed (SIGKILL) when GitHub has created the first pull
// request and not yet answered, and again when it has merged it and not
// yet answered; reruns finish the plan with one pull request and one
// merge per story and each issue's comments posted once.
func TestKilledWhileLandingThroughPullRequests(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	remote := filepath.Join(t.TempDir(), "remote.git")
	f.git(t, "clone", "-q", "--bare", f.repo, remote)
	var (
		mu     sync.Mutex
		killAt string
		cmd    *exec.Cmd
		killed bool
	)
	gh := fakegithub.New(fakegithub.Config{Token: "ghs_land", GitDir: remote, Checks: []string{"test"},
		BeforeAnswer: func(method, route string, status int) {
			mu.Lock()
			defer mu.Unlock()
			if killAt != "" && method+" "+route == killAt && status < 300 && cmd != nil && !killed {
				_ = cmd.Process.Kill()
				killed = true
			}
		}})
	defer gh.Close()
	one := gh.CreateIssue("Add one", "Write one.", "foreman")
	two := gh.CreateIssue("Add two", "Blocked by #1", "foreman")
	args := []string{"-repo", f.repo, "-source", "github:octocat/Hello-World", "-agent", shellQuote(f.agent) + " {prompt}",
		"-bind", f.ctl, "-gate", `sh -c '! grep -qs BAD *.txt'`, "-github-api", gh.BaseURL(),
		"-land", "pr?remote=" + remote + "&interval=20ms"}
	run := func(at string) (int, string) {
		c, stdout, stderr := f.command(t, args...)
		c.Env = append(c.Env, "GITHUB_TOKEN=ghs_land")
		mu.Lock()
		killAt, cmd, killed = at, c, false
		require.NoError(t, c.Start())
		mu.Unlock()
		err := c.Wait()
		mu.Lock()
		defer mu.Unlock()
		cmd = nil
		if at != "" {
			require.True(t, killed, "killed at %s; stdout:\n%s\nstderr:\n%s", at, stdout, stderr)
			return -1, ""
		}
		return exitCode(t, err), stdout.String() + stderr.String()
	}
	run("POST /repos/{owner}/{repo}/pulls")
	require.Len(t, gh.Pulls(), 1, "created; the host died before its record")
	run("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")
	require.True(t, gh.Pulls()[0].Merged, "merged; the host died before it knew")
	code, out := run("")
	require.Equal(t, exitMerged, code, out)

	pulls := gh.Pulls()
	require.Len(t, pulls, 2, "one pull request per story")
	st := gh.Stats()
	assert.Equal(t, 2, st.ByRoute["POST /repos/{owner}/{repo}/pulls"], "each created once")
	assert.Equal(t, 2, st.ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "each merged once")
	for _, n := range []int{one, two} {
		is := gh.Issue(n)
		assert.Equal(t, "closed", is.State, "#%d", n)
		require.Len(t, is.Comments, 2, "#%d: started and merged, each once: %q", n, is.Comments)
	}
	assert.ElementsMatch(t, []string{"issue-1", "issue-2"}, f.merged(t), "the local main has both merges")
	t.Logf("REST calls over three runs, two killed: %d (%d not modified); %v", st.Requests, st.NotModified, st.ByRoute)
}
