package ghland_test

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/internal/teamtest"
)

// The reference binary (examples/foreman) with -land pr, against the
// fake GitHub: its tests live here because an example's tests import
// nothing internal (examples/copytest), and the fake is.

// refBinary builds the reference binary once per test process.
type refBinary struct {
	once sync.Once
	path string
	err  error
}

func (b *refBinary) get(t *testing.T) string {
	t.Helper()
	b.once.Do(func() {
		dir, err := os.MkdirTemp("", "ghland-foreman-")
		if err != nil {
			b.err = err
			return
		}
		b.path = filepath.Join(dir, "foreman")
		out, err := exec.Command("go", "build", "-o", b.path, "github.com/agentforeman/foreman/examples/foreman").CombinedOutput()
		if err != nil {
			b.err = errors.New(string(out))
		}
	})
	require.NoError(t, b.err, "building the reference binary")
	return b.path
}

// binaries is the test process's one build; TestMain removes it.
var binaries refBinary

// binFixture is a repository, the scripted agent (teamtest's), a bare
// remote cloned from the repository, and the fake GitHub over it.
type binFixture struct {
	f      *teamtest.Fixture
	agent  string
	remote string
	gh     *fakegithub.Server
}

func newBinFixture(t *testing.T, cfg fakegithub.Config) *binFixture {
	t.Helper()
	f := teamtest.New(t, "Ada")
	b := &binFixture{f: f, agent: filepath.Join(t.TempDir(), "agent.sh"), remote: filepath.Join(t.TempDir(), "remote.git")}
	require.NoError(t, os.WriteFile(b.agent, []byte(strings.ReplaceAll(teamtest.AgentScript, "%CTL%", "'"+f.Ctl+"'")), 0o755))
	teamtest.Git(t, f.Repo, f.Env, "clone", "-q", "--bare", f.Repo, b.remote)
	cfg.Token, cfg.GitDir = "ghs_land", b.remote
	b.gh = fakegithub.New(cfg)
	t.Cleanup(b.gh.Close)
	return b
}

func (b *binFixture) args(extra ...string) []string {
	return append([]string{"-repo", b.f.Repo, "-agent", b.agent + " {prompt}", "-bind", b.f.Ctl, "-gate", "sh -c 'ls *.txt'",
		"-github-api", b.gh.BaseURL()}, extra...)
}

// command is the binary with args and the token in its environment.
func (b *binFixture) command(t *testing.T, args ...string) (*exec.Cmd, *bytes.Buffer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	cmd := exec.CommandContext(ctx, binaries.get(t), args...)
	cmd.Env = append(append(os.Environ(), b.f.Env...), "GITHUB_TOKEN=ghs_land")
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	return cmd, &out
}

func exitStatus(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

// landed lists the stories on the local main, by their trailers.
func (b *binFixture) landed(t *testing.T) []string {
	out := teamtest.Git(t, b.f.Repo, b.f.Env, "log", "--format=%(trailers:key=Foreman-Item,valueonly)", "main")
	return strings.Fields(out)
}

const threeStories = `stories:
  - id: US-001
    title: First
  - id: US-002
    title: Second, after the first
    after: [US-001]
  - id: US-003
    title: Third, on its own
`

// TestTheReferenceBinaryLandsThePlanThroughPullRequests: -land pr pushes
// each story to a real bare remote and lands it through one pull request
// on the fake GitHub; the local main gets every merge, trailer and all; a
// rerun opens and merges nothing.
func TestTheReferenceBinaryLandsThePlanThroughPullRequests(t *testing.T) {
	b := newBinFixture(t, fakegithub.Config{Checks: []string{"test"}})
	plan := filepath.Join(t.TempDir(), "stories.yaml")
	require.NoError(t, os.WriteFile(plan, []byte(threeStories), 0o644))
	args := b.args("-plan", plan, "-land", "pr:octocat/Hello-World?remote="+b.remote+"&interval=20ms")
	cmd, out := b.command(t, args...)
	require.Equal(t, 0, exitStatus(cmd.Run()), out.String())
	pulls := b.gh.Pulls()
	require.Len(t, pulls, 3, "one pull request per story")
	for _, p := range pulls {
		assert.True(t, p.Merged, "#%d %s", p.Number, p.Title)
		assert.Contains(t, p.Body, "Gate results: ", "#%d", p.Number)
	}
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, b.landed(t), "the local main has the merges")
	assert.Contains(t, out.String(), "3 merged, 0 paused")
	assert.Contains(t, out.String(), "pull requests: ")

	cmd, out = b.command(t, args...)
	require.Equal(t, 0, exitStatus(cmd.Run()), out.String())
	assert.Len(t, b.gh.Pulls(), 3, "nothing opened again")
	assert.Equal(t, 3, b.gh.Stats().ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "nothing merged again")
}

// TestTheReferenceBinaryKilledWhileLanding: the reference binary, taking
// its stories from labelled issues and landing them through pull
// requests, is killed (SIGKILL) when GitHub has created the first pull
// request and not yet answered, and again when it has merged it and not
// yet answered; the third run finishes the plan with one pull request and
// one merge per story and each issue's comments posted once.
func TestTheReferenceBinaryKilledWhileLanding(t *testing.T) {
	stress.Long(t) // 12-14 s: each rerun reaps the killed run's agent, which has KillGrace to go
	var (
		mu     sync.Mutex
		killAt string
		cmd    *exec.Cmd
		killed bool
	)
	b := newBinFixture(t, fakegithub.Config{Checks: []string{"test"},
		BeforeAnswer: func(method, route string, status int) {
			mu.Lock()
			defer mu.Unlock()
			if killAt != "" && method+" "+route == killAt && status < 300 && cmd != nil && !killed {
				_ = cmd.Process.Kill()
				killed = true
			}
		}})
	one := b.gh.CreateIssue("Add one", "Write one.", "foreman")
	two := b.gh.CreateIssue("Add two", "Blocked by #1", "foreman")
	args := b.args("-source", "github:octocat/Hello-World", "-land", "pr?remote="+b.remote+"&interval=20ms")
	run := func(at string) (int, string) {
		c, out := b.command(t, args...)
		mu.Lock()
		killAt, cmd, killed = at, c, false
		require.NoError(t, c.Start())
		mu.Unlock()
		err := c.Wait()
		mu.Lock()
		defer mu.Unlock()
		cmd = nil
		if at != "" {
			require.True(t, killed, "killed at %s; output:\n%s", at, out)
		}
		return exitStatus(err), out.String()
	}
	run("POST /repos/{owner}/{repo}/pulls")
	require.Len(t, b.gh.Pulls(), 1, "created; the host died before its record")
	run("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge")
	require.True(t, b.gh.Pulls()[0].Merged, "merged; the host died before it knew")
	code, out := run("")
	require.Equal(t, 0, code, out)

	require.Len(t, b.gh.Pulls(), 2, "one pull request per story")
	st := b.gh.Stats()
	assert.Equal(t, 2, st.ByRoute["POST /repos/{owner}/{repo}/pulls"], "each created once")
	assert.Equal(t, 2, st.ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "each merged once")
	for _, n := range []int{one, two} {
		is := b.gh.Issue(n)
		assert.Equal(t, "closed", is.State, "#%d", n)
		require.Len(t, is.Comments, 2, "#%d: started and merged, each once: %q", n, is.Comments)
	}
	assert.ElementsMatch(t, []string{"issue-1", "issue-2"}, b.landed(t), "the local main has both merges")
	t.Logf("REST calls over three runs, two killed: %d (%d not modified); %v", st.Requests, st.NotModified, st.ByRoute)
}

// TestTheReferenceBinaryRefusesAnUnreachableRepositoryAtStart: -land pr
// with a token and an API it cannot reach (no network, a wrong host), or a
// repository that does not allow the merge method asked for, fails at
// once, with the cause, before any agent works; it used to plan, build
// and gate a whole story before the landing failed.
func TestTheReferenceBinaryRefusesAnUnreachableRepositoryAtStart(t *testing.T) {
	b := newBinFixture(t, fakegithub.Config{})
	closed := fakegithub.New(fakegithub.Config{Token: "ghs_land"})
	unreachable := closed.BaseURL()
	closed.Close()
	squashOnly := fakegithub.New(fakegithub.Config{Token: "ghs_land", GitDir: b.remote, MergeMethods: []string{"squash"}})
	t.Cleanup(squashOnly.Close)
	ran := filepath.Join(t.TempDir(), "agent-ran")
	agent := filepath.Join(t.TempDir(), "agent.sh")
	require.NoError(t, os.WriteFile(agent, []byte("#!/bin/sh\n: > '"+ran+"'\n"), 0o755))
	plan := filepath.Join(t.TempDir(), "stories.yaml")
	require.NoError(t, os.WriteFile(plan, []byte(threeStories), 0o644))
	for _, tc := range []struct{ name, api, land, says string }{
		{"unreachable API", unreachable, "pr:octocat/Hello-World?remote=" + b.remote, "connection refused"},
		{"merge method not allowed", squashOnly.BaseURL(), "pr:octocat/Hello-World?method=rebase&remote=" + b.remote,
			"does not allow the rebase merge method"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cmd, out := b.command(t, "-repo", b.f.Repo, "-agent", agent+" {prompt}", "-bind", b.f.Ctl, "-gate", "true",
				"-github-api", tc.api, "-plan", plan, "-land", tc.land)
			code := exitStatus(cmd.Run())
			assert.NotEqual(t, 0, code, out.String())
			assert.Contains(t, out.String(), "foreman: -land: ghland: the repository cannot land stories")
			assert.Contains(t, out.String(), tc.says)
			assert.NoFileExists(t, ran, "no agent ran")
		})
	}
}
