package ghland_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/fakegithub"
	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
)

var t0 = time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC)

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=T", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=T", "GIT_COMMITTER_EMAIL=t@x")
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// world is a local repository with a worktree per story, a bare remote,
// and the fake GitHub over it.
type world struct {
	local, remote, state string
	gh                   *fakegithub.Server
	clk                  *foreman.FakeClock
}

func newWorld(t *testing.T, cfg fakegithub.Config) *world {
	t.Helper()
	dir := t.TempDir()
	w := &world{local: filepath.Join(dir, "local"), remote: filepath.Join(dir, "remote.git"), state: filepath.Join(dir, "land"),
		clk: foreman.NewFakeClock(t0)}
	git(t, dir, "init", "-q", "--bare", "-b", "main", w.remote)
	git(t, dir, "init", "-q", "-b", "main", w.local)
	require.NoError(t, os.WriteFile(filepath.Join(w.local, "README"), []byte("hello\n"), 0o644))
	git(t, w.local, "add", "-A")
	git(t, w.local, "commit", "-q", "-m", "first")
	git(t, w.local, "push", "-q", w.remote, "main")
	cfg.GitDir, cfg.Clock = w.remote, w.clk
	if cfg.Token == "" {
		cfg.Token = "ghs_test"
	}
	w.gh = fakegithub.New(cfg)
	t.Cleanup(w.gh.Close)
	return w
}

// story makes a story's worktree with a change in it (uncommitted).
func (w *world) story(t *testing.T, id foreman.ItemID, file, content string) string {
	t.Helper()
	wt := filepath.Join(w.local, ".worktrees", string(id))
	git(t, w.local, "worktree", "add", "-q", "-b", "foreman/"+string(id), wt, "main")
	require.NoError(t, os.WriteFile(filepath.Join(wt, file), []byte(content), 0o644))
	return wt
}

func (w *world) lander(t *testing.T, mod func(*ghland.Config)) *ghland.Lander {
	t.Helper()
	cfg := ghland.Config{Owner: w.gh.Owner(), Repo: w.gh.Repo(), Token: "ghs_test", BaseURL: w.gh.BaseURL(), Remote: w.remote,
		Worktree: func(id foreman.ItemID) (string, error) { return filepath.Join(w.local, ".worktrees", string(id)), nil },
		StateDir: w.state, Interval: 10 * time.Second, WriteGap: -1, Clock: w.clk, LocalRepo: w.local}
	if mod != nil {
		mod(&cfg)
	}
	l, err := ghland.New(cfg)
	require.NoError(t, err)
	return l
}

// reports collects what Watch reports; refuse, when set, says which
// reports the host does not take.
type reports struct {
	mu     sync.Mutex
	events []reported
	refuse func(pipeline.Event) bool
}

type reported struct {
	item foreman.ItemID
	ev   pipeline.Event
	tick int
}

func (r *reports) report(tick *atomic.Int64) ghland.Report {
	return func(_ context.Context, item foreman.ItemID, ev pipeline.Event) error {
		r.mu.Lock()
		defer r.mu.Unlock()
		if r.refuse != nil && r.refuse(ev) {
			return &pipeline.TransitionError{Item: item, Event: ev.Kind}
		}
		r.events = append(r.events, reported{item: item, ev: ev, tick: int(tick.Load())})
		return nil
	}
}

func (r *reports) all() []reported {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]reported(nil), r.events...)
}

// watch runs Watch on the fake clock, one interval at a time, until done
// says so or max intervals passed; it returns the intervals it took.
func (w *world) watch(t *testing.T, l *ghland.Lander, r *reports, max int, done func() bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// The tick a report is made in: the loop moves it on while Watch may
	// be in a look.
	var tick atomic.Int64
	wctx, stop := context.WithCancel(ctx)
	ended := make(chan error, 1)
	go func() { ended <- l.Watch(wctx, r.report(&tick)) }()
	for ; tick.Load() < int64(max); tick.Add(1) {
		require.NoError(t, w.clk.BlockUntil(ctx, 1)) // Watch waits for its next tick: a look is over
		if done() {
			break
		}
		w.clk.Advance(10 * time.Second)
	}
	// The look the last Advance started ends before Watch is stopped, so
	// a test counts whole looks, not part of one cut short.
	require.NoError(t, w.clk.BlockUntil(ctx, 1))
	stop()
	require.ErrorIs(t, <-ended, context.Canceled)
	return int(tick.Load())
}

func gitShow(gitDir, rev, path string) string {
	out, err := exec.Command("git", "--git-dir", gitDir, "show", rev+":"+path).Output()
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(out))
}

func teamAgent(script string, f *teamtest.Fixture) phases.AgentDriver {
	return agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Format: agentcmd.FormatClaude, Env: f.Env,
		Sandbox: agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: f.Ctl, Writable: true}}}})
}
