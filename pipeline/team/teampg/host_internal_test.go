package teampg

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
)

var testGitEnv = []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1"}

// sharedRepo makes a bare repository with one commit on main.
func sharedRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	seed := filepath.Join(dir, "seed")
	run := func(dir string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = dir, append(os.Environ(), append(testGitEnv,
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@x", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@x")...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.MkdirAll(seed, 0o755))
	run(seed, "init", "-q", "-b", "main")
	run(seed, "commit", "-q", "--allow-empty", "-m", "start")
	run(dir, "clone", "-q", "--bare", seed, "shared.git")
	return filepath.Join(dir, "shared.git")
}

func openClone(t *testing.T, remote string) *gitremote.Clone {
	t.Helper()
	c, err := gitremote.Open(context.Background(), gitremote.Config{Remote: remote, Dir: filepath.Join(t.TempDir(), "clone"),
		Merge: merge.Config{GitEnv: testGitEnv, Author: merge.Identity{Name: "t", Email: "t@x"}}})
	require.NoError(t, err)
	return c
}

// stages plays the team's stage agent: it writes a file, or waits for its
// context to end when told to.
type stages struct {
	started chan struct{}
	block   bool
}

func (s *stages) Execute(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	if s.block {
		// Work never pushed: not the story's.
		if err := os.WriteFile(filepath.Join(req.WorkspacePath, "unpushed.txt"), nil, 0o644); err != nil {
			return phases.AgentResult{}, err
		}
		close(s.started)
		<-ctx.Done()
		return phases.AgentResult{}, ctx.Err()
	}
	if err := os.WriteFile(filepath.Join(req.WorkspacePath, "work.txt"), []byte("work\n"), 0o644); err != nil {
		return phases.AgentResult{}, err
	}
	return phases.AgentResult{Success: true, Result: "done"}, nil
}

func newHostAgent(clone *gitremote.Clone, st phases.AgentDriver) (*hostAgent, *foreman.FakeClock) {
	clk := foreman.NewFakeClock(time.Unix(0, 0))
	h := &hostAgent{cfg: HostConfig{Clone: clone, Stages: st, Store: store.NewMemory(store.MemoryOptions{})}, clk: clk, log: slog.New(slog.DiscardHandler),
		current: map[foreman.ItemID]foreman.AssignmentID{}, busy: map[foreman.ItemID]int{}, unended: map[foreman.AssignmentID]bool{}}
	h.idle = sync.NewCond(&h.mu)
	return h, clk
}

func request(item foreman.ItemID, wt string) phases.AgentRequest {
	return phases.AgentRequest{WorkspacePath: wt, TaskPrompt: pipeline.AssignmentBlock(pipeline.SpawnRequest{
		Item: item, Stage: 1, Worker: "w", Assignment: foreman.AssignmentID(string(item) + ".1")})}
}

// A withdrawn attempt still winding down on a host keeps a new attempt at
// the same story from checking out until it has stopped, and then cleans
// its worktree up: the two never share it.
func TestANewAttemptWaitsForTheWithdrawnOneOnTheSameHost(t *testing.T) {
	ctx := context.Background()
	clone := openClone(t, sharedRepo(t))
	st := &stages{started: make(chan struct{}), block: true}
	h, clk := newHostAgent(clone, st)

	first := worker.Assignment{ID: "a1", Item: "S1"}
	require.NoError(t, h.prepare(ctx, &first))
	runCtx, withdraw := context.WithCancel(ctx)
	defer withdraw()
	done := make(chan error, 1)
	go func() {
		_, err := h.Execute(runCtx, request("S1", first.Worktree), nil)
		done <- err
	}()
	<-st.started

	second := worker.Assignment{ID: "a2", Item: "S1"}
	prepared := make(chan error, 1)
	go func() { prepared <- h.prepare(ctx, &second) }()
	select {
	case err := <-prepared:
		t.Fatalf("the second attempt checked out while the first still ran: %v", err)
	default:
	}
	withdraw()
	assert.ErrorIs(t, <-done, context.Canceled)
	require.NoError(t, <-prepared)
	assert.True(t, h.owns("S1", "a2"))
	assert.DirExists(t, second.Worktree)
	assert.NoFileExists(t, filepath.Join(second.Worktree, "unpushed.txt"), "the new attempt starts clean, after the old one's worktree was removed")

	// An attempt that does not stop in time leaves the new one failed,
	// with the cause, rather than the host's loop stuck.
	st2 := &stages{started: make(chan struct{}), block: true}
	h.cfg.Stages = st2
	stuck, stop := context.WithCancel(ctx) // not withdrawn before the new attempt gives up
	defer stop()
	go func() {
		_, err := h.Execute(stuck, request("S1", second.Worktree), nil)
		done <- err
	}()
	<-st2.started
	third := worker.Assignment{ID: "a3", Item: "S1"}
	go func() { prepared <- h.prepare(ctx, &third) }()
	bound, cancel := context.WithTimeout(ctx, time.Minute) // a bound on a hang, not a timing assertion
	defer cancel()
	require.NoError(t, clk.BlockUntil(bound, 1), "the new attempt is not waiting")
	clk.Advance(stopWait)
	err := <-prepared
	require.Error(t, err)
	assert.Contains(t, err.Error(), "an earlier attempt at S1 is still running on this host")
	assert.True(t, h.owns("S1", "a2"), "the running attempt keeps its worktree")
}

// A stage whose story was pushed by another attempt meanwhile is stale:
// its work is dropped with its worktree.
func TestStaleWorkIsDroppedWithItsWorktree(t *testing.T) {
	ctx := context.Background()
	remote := sharedRepo(t)
	here, elsewhere := openClone(t, remote), openClone(t, remote)
	h, _ := newHostAgent(here, &stages{})

	a := worker.Assignment{ID: "a1", Item: "S1"}
	require.NoError(t, h.prepare(ctx, &a))
	wt, err := elsewhere.Checkout(ctx, "S1")
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt.Path, "other.txt"), []byte("other\n"), 0o644))
	_, err = elsewhere.Push(ctx, "S1", "S1: the newer attempt")
	require.NoError(t, err)

	_, err = h.Execute(ctx, request("S1", a.Worktree), nil)
	assert.ErrorIs(t, err, gitremote.ErrBranchMoved)
	assert.NoDirExists(t, a.Worktree)
	recs, err := h.cfg.Store.List(ctx, resultKind)
	require.NoError(t, err)
	assert.Empty(t, recs, "no result recorded for stale work")
}

// A run prepared but not started yet owns the worktree as much as one that
// runs: a new attempt waits for it too.
func TestANewAttemptWaitsForOnePreparedButNotStarted(t *testing.T) {
	ctx := context.Background()
	h, clk := newHostAgent(openClone(t, sharedRepo(t)), &stages{})
	first := worker.Assignment{ID: "a1", Item: "S1"}
	require.NoError(t, h.prepare(ctx, &first))

	second := worker.Assignment{ID: "a2", Item: "S1"}
	prepared := make(chan error, 1)
	go func() { prepared <- h.prepare(ctx, &second) }()
	bound, cancel := context.WithTimeout(ctx, time.Minute) // a bound on a hang, not a timing assertion
	defer cancel()
	require.NoError(t, clk.BlockUntil(bound, 1), "the new attempt is not waiting")
	assert.True(t, h.owns("S1", "a1"))

	withdrawn, stop := context.WithCancel(ctx)
	stop()
	_, _ = h.Execute(withdrawn, request("S1", first.Worktree), nil) // the runtime still calls it, cancelled
	require.NoError(t, <-prepared)
	assert.True(t, h.owns("S1", "a2"))
}
