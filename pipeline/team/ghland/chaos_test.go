package ghland_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
)

// The chaos test's lander runs in a child process (this test binary with
// GHLAND_CHILD set) that the test kills with SIGKILL at the moment the
// fake GitHub has made a change and not yet answered it.

func TestMain(m *testing.M) {
	if os.Getenv("GHLAND_CHILD") != "" {
		os.Exit(child())
	}
	code := m.Run()
	if binaries.path != "" {
		os.RemoveAll(filepath.Dir(binaries.path))
	}
	os.Exit(code)
}

// child lands story US-1 as a host would: Merge, then Watch until the
// landing ends. The host's side (what the pipeline took) is the events
// file: an event of a kind already in it is refused as a transition the
// story no longer takes.
func child() int {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	env := os.Getenv
	l, err := ghland.New(ghland.Config{Owner: "octocat", Repo: "Hello-World", Token: "ghs_test", BaseURL: env("GHLAND_API"),
		Remote: env("GHLAND_REMOTE"), LocalRepo: env("GHLAND_LOCAL"), StateDir: env("GHLAND_STATE"), WriteGap: -1,
		Interval: 20 * time.Millisecond,
		Worktree: func(id foreman.ItemID) (string, error) {
			return filepath.Join(env("GHLAND_LOCAL"), ".worktrees", string(id)), nil
		}})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	events := env("GHLAND_EVENTS")
	take := func(kind pipeline.EventKind, detail string) error {
		data, _ := os.ReadFile(events)
		if strings.Contains(string(data), kind.String()+" ") {
			return &pipeline.TransitionError{Item: "US-1", Event: kind}
		}
		f, err := os.OpenFile(events, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return err
		}
		defer f.Close()
		if _, err := fmt.Fprintf(f, "%s %s\n", kind, detail); err != nil {
			return err
		}
		return f.Sync()
	}
	out, err := l.Merge(ctx, pipeline.MergeRequest{Item: "US-1", Title: "Add one"})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	if out.Already {
		if err := take(pipeline.EventMerged, out.Commit); err != nil && !errors.Is(err, pipeline.ErrInvalidTransition) {
			return 1
		}
		return 0
	}
	wctx, stop := context.WithCancel(ctx)
	err = l.Watch(wctx, func(_ context.Context, _ foreman.ItemID, ev pipeline.Event) error {
		err := take(ev.Kind, ev.Commit+ev.Detail)
		stop()
		return err
	})
	if !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	return 0
}

// TestKilledBetweenCreationAndRecordAndBetweenMergeAndDone: the lander's
// host is killed (SIGKILL) when GitHub has created the pull request and
// not yet answered, and again when GitHub has merged it and not yet
// answered; each rerun finds what was done: one pull request, one merge,
// the merge taken once.
func TestKilledBetweenCreationAndRecordAndBetweenMergeAndDone(t *testing.T) {
	var (
		mu     sync.Mutex
		killAt string // the route whose answer the child does not live to get
		cmd    *exec.Cmd
		killed bool
	)
	w := newWorld(t, fakegithub.Config{Checks: []string{"test"}, BeforeAnswer: func(method, route string, status int) {
		mu.Lock()
		defer mu.Unlock()
		if killAt != "" && method+" "+route == killAt && status < 300 && cmd != nil {
			require.NoError(t, cmd.Process.Kill()) // SIGKILL
			killed = true
		}
	}})
	w.story(t, "US-1", "one.txt", "one\n")
	events := filepath.Join(t.TempDir(), "events")
	run := func(at string) error {
		c := exec.Command(os.Args[0], "-test.run=^$")
		c.Env = append(os.Environ(), "GHLAND_CHILD=1", "GHLAND_API="+w.gh.BaseURL(), "GHLAND_REMOTE="+w.remote,
			"GHLAND_LOCAL="+w.local, "GHLAND_STATE="+w.state, "GHLAND_EVENTS="+events,
			"GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@x")
		var stderr strings.Builder
		c.Stderr = &stderr
		mu.Lock()
		killAt, cmd, killed = at, c, false
		require.NoError(t, c.Start())
		mu.Unlock()
		err := c.Wait()
		mu.Lock()
		defer mu.Unlock()
		cmd = nil
		if at != "" {
			assert.True(t, killed, "killed at %s", at)
		}
		if err != nil && !killed {
			return fmt.Errorf("%w: %s", err, stderr.String())
		}
		return nil
	}
	require.NoError(t, run("POST /repos/{owner}/{repo}/pulls"))
	require.Len(t, w.gh.Pulls(), 1, "created, not recorded")
	n, err := w.lander(t, nil).PullRequest("US-1")
	require.NoError(t, err)
	assert.Zero(t, n, "the host died before its record")

	require.NoError(t, run("PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"))
	pulls := w.gh.Pulls()
	require.Len(t, pulls, 1, "the rerun found the pull request by its branch and trailer")
	require.True(t, pulls[0].Merged, "merged, the answer lost")
	data, _ := os.ReadFile(events)
	assert.Empty(t, string(data), "nothing taken yet")

	require.NoError(t, run(""))
	require.NoError(t, run(""), "a further rerun changes nothing")
	assert.Len(t, w.gh.Pulls(), 1, "one pull request")
	st := w.gh.Stats()
	assert.Equal(t, 1, st.ByRoute["PUT /repos/{owner}/{repo}/pulls/{pull_number}/merge"], "one merge")
	assert.Equal(t, 1, st.ByRoute["POST /repos/{owner}/{repo}/pulls"], "one creation")
	var merged []string
	f, err := os.Open(events)
	require.NoError(t, err)
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		merged = append(merged, sc.Text())
	}
	require.Equal(t, []string{"Merged " + pulls[0].MergeCommit}, merged, "the merge taken once, with its commit")
	assert.Equal(t, pulls[0].MergeCommit, git(t, w.local, "rev-parse", "main"))
	t.Logf("REST calls over three hosts, two of them killed: %d; %v", st.Requests, st.ByRoute)
}
