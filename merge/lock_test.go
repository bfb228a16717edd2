package merge

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

const helperEnv = "FOREMAN_MERGE_LOCK_HELPER"

// TestMain doubles as the helper process of the multi-process lock test
// and of the orphaned git test.
func TestMain(m *testing.M) {
	// A developer's own git config (core.hooksPath, commit.gpgsign) must not
	// reach the test repositories (whose own config turns git's auto
	// maintenance off: internal/testrepo); every git the tests start,
	// helper processes' included, inherits this.
	if err := testrepo.IsolateGit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if spec := os.Getenv(helperEnv); spec != "" {
		os.Exit(lockHelper(spec))
	}
	if repo := os.Getenv(orphanHelperEnv); repo != "" {
		os.Exit(orphanHelper(repo))
	}
	os.Exit(m.Run())
}

// lockHelper runs "repo|prefix|count" create/remove cycles and prints each failure.
func lockHelper(spec string) int {
	parts := strings.Split(spec, "|")
	count, _ := strconv.Atoi(parts[2])
	ctx := context.Background()
	mgr, err := New(ctx, Config{Repo: parts[0], Author: Identity(testIdentity), DeleteBranchOnRemove: true})
	if err != nil {
		fmt.Println("new:", err)
		return 1
	}
	failures := cycleWorktrees(ctx, mgr, parts[1], count, 2)
	for _, f := range failures {
		fmt.Println(f)
	}
	if len(failures) > 0 {
		return 1
	}
	return 0
}

// cycleWorktrees creates and removes count worktrees from workers
// goroutines, checking each one, and returns the failures.
func cycleWorktrees(ctx context.Context, mgr *Manager, prefix string, count, workers int) []string {
	var (
		mu       sync.Mutex
		failures []string
		next     atomic.Int64
		wg       sync.WaitGroup
	)
	fail := func(format string, args ...any) {
		mu.Lock()
		defer mu.Unlock()
		failures = append(failures, fmt.Sprintf(format, args...))
	}
	for range workers {
		wg.Go(func() {
			for {
				n := next.Add(1)
				if n > int64(count) {
					return
				}
				id := foreman.ItemID(fmt.Sprintf("%s-%04d", prefix, n))
				wt, err := mgr.Create(ctx, id)
				if err != nil {
					fail("create %s: %v", id, err)
					continue
				}
				if _, healthy := inspectWorktree(wt.Path); !healthy || wt.Base == "" {
					fail("create %s: unhealthy worktree (base %q)", id, wt.Base)
				}
				if err := mgr.Remove(ctx, id); err != nil {
					fail("remove %s: %v", id, err)
				}
			}
		})
	}
	wg.Wait()
	return failures
}

// TestParallelCreatesAcrossManagersFailZeroTimes holds Create and Remove to
// 0 failures in parallel cycles on one repository, from two Managers.
//
// By default it runs 24 cycles: every cycle takes the same code path, and 24
// from 12 goroutines already contend for the lock at every step. The full
// 1,000 (200 under the race detector, where the detector has seen all it can
// after a few and the rest is waiting for git) run with FOREMAN_STRESS=1,
// which CI does in a step of its own:
// FOREMAN_STRESS=1 go test -run 'TestParallelCreates' -count=1 ./merge/
func TestParallelCreatesAcrossManagersFailZeroTimes(t *testing.T) {
	stress.Long(t) // contention by repetition: CI runs it at full size
	t.Parallel()
	cycles := stress.Size(24, 1000)
	if raceEnabled {
		cycles = stress.Size(24, 200)
	}
	ctx := context.Background()
	repo := newRepo(t, nil)
	// Two Managers on one repository: they share nothing but the file lock.
	// Branches are kept (one git process per cycle instead of two keeps the
	// test fast); the multi-process test below deletes them.
	m1 := newManager(t, repo, nil)
	m2 := newManager(t, repo, nil)
	var failures []string
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i, m := range []*Manager{m1, m2} {
		wg.Go(func() {
			f := cycleWorktrees(ctx, m, fmt.Sprintf("m%d", i), cycles/2, 6)
			mu.Lock()
			failures = append(failures, f...)
			mu.Unlock()
		})
	}
	wg.Wait()
	assert.Empty(t, failures, "0 failures in %d creates", cycles)
	t.Logf("%d create+remove cycles (race detector: %v, %s=%q), %d failures", cycles, raceEnabled, stress.EnvVar, os.Getenv(stress.EnvVar), len(failures))
	assertNoWorktreesLeft(t, m1, repo, false)
	assert.Len(t, strings.Fields(git(t, repo, "branch", "--list", "foreman/*")), cycles)
}

// TestParallelCreatesAcrossProcessesFailZeroTimes holds Create and Remove to
// 0 failures when four processes share one repository: 4 cycles each by
// default, 25 with FOREMAN_STRESS=1.
func TestParallelCreatesAcrossProcessesFailZeroTimes(t *testing.T) {
	stress.Long(t) // contention by repetition: CI runs it at full size
	t.Parallel()
	repo := newRepo(t, nil)
	const procs = 3
	each := stress.Size(4, 25)
	var wg sync.WaitGroup
	outs := make([]string, procs)
	errs := make([]error, procs)
	for p := range procs {
		wg.Go(func() {
			cmd := exec.Command(os.Args[0], "-test.run=^$")
			cmd.Env = append(os.Environ(), fmt.Sprintf("%s=%s|p%d|%d", helperEnv, repo, p, each))
			out, err := cmd.CombinedOutput()
			outs[p], errs[p] = string(out), err
		})
	}
	// This process takes part too.
	m := newManager(t, repo, func(c *Config) { c.DeleteBranchOnRemove = true })
	local := cycleWorktrees(context.Background(), m, "local", each, 2)
	wg.Wait()
	for p := range procs {
		assert.NoError(t, errs[p], "process %d: %s", p, outs[p])
	}
	assert.Empty(t, local)
	assertNoWorktreesLeft(t, m, repo, true)
}

func assertNoWorktreesLeft(t *testing.T, m *Manager, repo string, noBranches bool) {
	t.Helper()
	list, err := m.List(context.Background())
	require.NoError(t, err)
	assert.Empty(t, list)
	assert.Equal(t, 1, strings.Count(git(t, repo, "worktree", "list", "--porcelain"), "worktree "))
	if noBranches {
		assert.Empty(t, git(t, repo, "branch", "--list", "foreman/*"))
	}
	assert.Empty(t, porcelain(t, repo))
}

func TestLockHonoursCancellation(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	holder := newManager(t, repo, nil)
	waiter := newManager(t, repo, nil)
	unlock, err := holder.lock.lock(context.Background())
	require.NoError(t, err)
	defer unlock()

	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	_, err = waiter.Create(ctx, "blocked")
	assert.ErrorIs(t, err, context.DeadlineExceeded, "another Manager's hold excludes this one")

	// And in one Manager, a queued goroutine leaves when its context ends.
	ctx2, cancel2 := context.WithCancel(context.Background())
	cancel2()
	_, err = holder.Merge(ctx2, "blocked", Request{})
	assert.ErrorIs(t, err, context.Canceled)
}

// A fake Config.Clock that nobody advances must not stall a Manager waiting
// for the repository lock: the holder may be another process.
func TestLockWaitIsNotPacedByAFakeClock(t *testing.T) {
	t.Parallel()
	repo := newRepo(t, nil)
	contended := make(chan struct{})
	waiter := newManager(t, repo, func(c *Config) {
		c.Clock = newFakeClockAt(time.Now())
		c.Logger = slog.New(&signalOnMessage{msg: "merge: waiting for the repository lock", ch: contended})
	})
	holder := newManager(t, repo, nil)
	unlock, err := holder.lock.lock(context.Background())
	require.NoError(t, err)

	// A deadline only so that a stall fails the test instead of hanging it.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := waiter.Create(ctx, "w")
		done <- err
	}()
	select {
	case <-contended:
	case err := <-done:
		unlock()
		t.Fatalf("Create returned while the lock was held: %v", err)
	}
	unlock()
	assert.NoError(t, <-done, "the lock is taken once free, though the fake clock never moved")
}

// signalOnMessage closes ch the first time a record's message starts with msg.
type signalOnMessage struct {
	msg  string
	ch   chan struct{}
	once sync.Once
}

func (h *signalOnMessage) Enabled(context.Context, slog.Level) bool { return true }
func (h *signalOnMessage) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *signalOnMessage) WithGroup(string) slog.Handler            { return h }
func (h *signalOnMessage) Handle(_ context.Context, r slog.Record) error {
	if strings.HasPrefix(r.Message, h.msg) {
		h.once.Do(func() { close(h.ch) })
	}
	return nil
}
