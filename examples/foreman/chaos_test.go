package main

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The plan of the chaos runs: dependencies in two chains, a story whose
// build always fails (it pauses) and a dependent that must never start.
const chaosStories = `workers: 2
stories:
  - id: US-001
    title: One
  - id: US-002
    title: Two, after one
    after: [US-001]
  - id: US-003
    title: Three
  - id: US-004
    title: Four, after two and three
    after: [US-002, US-003]
  - id: US-005
    title: Five, which cannot be built
  - id: US-006
    title: Six, after five
    after: [US-005]
`

// chaosEnv names the environment that steers TestKilledAtRandomPoints.
const (
	envChaosRuns = "FOREMAN_CHAOS_RUNS" // runs to make (default 6; CI's chaos step makes 50)
	envChaosSeed = "FOREMAN_CHAOS_SEED" // the first run's seed (default: from the clock); run i uses seed+i
)

// TestKilledAtRandomPoints runs the reference binary on a real repository
// with subprocess agents and SIGKILLs it at random points, again and again,
// restarting it each time, then lets a last run finish. Whatever the kill
// points, every story that can be built is merged exactly once, the failing
// one is paused with its cause and its dependent never starts, and nothing
// is left behind: no worktree but the paused story's, no git lock file, no
// agent process, main clean.
//
// Each run prints its seed. The seed decides each kill's point: after how
// many more agent executions and how long after the last of them. The
// moment that hits depends on the machine's speed, so a replay of a seed
// (FOREMAN_STRESS=1 FOREMAN_CHAOS_SEED=<seed> FOREMAN_CHAOS_RUNS=1 go test
// -run TestKilledAtRandomPoints ./examples/foreman/) repeats the points in
// the plan, not always the exact instants.
func TestKilledAtRandomPoints(t *testing.T) {
	skipUnlessLong(t)
	runs, first := chaosSeeds(t, envChaosRuns, 6, envChaosSeed)
	for i := range runs {
		seed := first + uint64(i)
		t.Run(fmt.Sprintf("seed=%d", seed), func(t *testing.T) {
			t.Parallel()
			chaosRun(t, seed)
			if t.Failed() {
				t.Logf("replay: FOREMAN_STRESS=1 %s=%d %s=1 go test -count=1 -run TestKilledAtRandomPoints ./examples/foreman/", envChaosSeed, seed, envChaosRuns)
			}
		})
	}
}

// chaosRun is one run of TestKilledAtRandomPoints: up to eight kills, then a
// run to the end.
func chaosRun(t *testing.T, seed uint64) {
	f := newFixture(t)
	require.NoError(t, os.WriteFile(f.plan, []byte(chaosStories), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "US-005.fail"), nil, 0o644))
	token := fmt.Sprintf("chaos-%d-%d", os.Getpid(), seed)
	rng := rand.New(rand.NewPCG(seed, 0x5eed))
	var delays []string
	kills := 0
	agentLog := filepath.Join(f.ctl, "log")
	for range 8 {
		// Each kill waits for the plan to move (one to three more agent
		// executions than before this run), then a random moment more:
		// so the kills fall throughout the plan, in agents, gates and
		// merges alike, whatever the machine's speed.
		target := countLines(agentLog) + 1 + rng.IntN(3)
		delay := time.Duration(rng.IntN(600)) * time.Millisecond
		if kills == 0 {
			// The first kill lands within 100 ms of an execution's start,
			// where the host has git commands of its own running (a
			// worktree being added, a snapshot): and on a fast machine a
			// later one could miss a plan that is already done.
			delay = time.Duration(rng.IntN(100)) * time.Millisecond
		}
		cmd, runOut, runErr := f.command(t, f.runArgs()...)
		cmd.Env = append(cmd.Env, "FOREMAN_CHAOS_TOKEN="+token)
		require.NoError(t, cmd.Start())
		exited := make(chan struct{})
		var struck atomic.Bool
		go func() {
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			for countLines(agentLog) < target {
				select {
				case <-exited:
					return
				case <-tick.C:
				}
			}
			select {
			case <-exited:
				return
			case <-time.After(delay):
			}
			struck.Store(true)
			_ = cmd.Process.Signal(syscall.SIGKILL)
		}()
		err := cmd.Wait()
		close(exited)
		assert.Empty(t, raceReports(runErr.String()), "seed %d: a data race in a run killed at execution %d", seed, target)
		if !struck.Load() {
			// The run ended before its kill: the plan is as far as it goes.
			require.Equal(t, exitNeedsPerson, exitCode(t, err), "seed %d: a run that was not killed ends waiting for a person\nstdout:\n%s\nstderr:\n%s", seed, runOut, runErr)
			break
		}
		kills++
		delays = append(delays, fmt.Sprintf("execution %d + %s (%d merged)", target, delay, len(f.merged(t))))
	}
	cmd, stdout, stderr := f.command(t, f.runArgs()...)
	cmd.Env = append(cmd.Env, "FOREMAN_CHAOS_TOKEN="+token)
	err := cmd.Run()
	t.Logf("seed %d: %d kills, after %s; then a run to the end", seed, kills, strings.Join(delays, ", "))
	assert.Empty(t, raceReports(stderr.String()), "seed %d: a data race in the last run", seed)
	require.Positive(t, kills, "seed %d: the plan finished before the first kill\nstdout:\n%s\nstderr:\n%s", seed, stdout, stderr)
	require.Equal(t, exitNeedsPerson, exitCode(t, err), "seed %d\nstdout:\n%s\nstderr:\n%s", seed, stdout, stderr)

	got := f.merged(t)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003", "US-004"}, got, "seed %d: each buildable story merged exactly once", seed)
	assert.Less(t, indexOf(got, "US-001"), indexOf(got, "US-002"), "seed %d", seed)
	assert.Less(t, indexOf(got, "US-002"), indexOf(got, "US-004"), "seed %d", seed)
	assert.Less(t, indexOf(got, "US-003"), indexOf(got, "US-004"), "seed %d", seed)
	for story, n := range f.executions(t) {
		assert.NotEqual(t, "US-006", strings.Fields(story)[0], "seed %d: the paused story's dependent never starts (%s ran %d times)", seed, story, n)
	}

	_, status, statusErr := f.foreman(t, "-repo", f.repo, "-status")
	assert.Empty(t, raceReports(statusErr), "seed %d: a data race in -status", seed)
	if t.Failed() {
		t.Logf("seed %d: the status after the last run:\n%s\nits stdout:\n%s\nstderr:\n%s", seed, status, stdout, stderr)
	}
	assert.Regexp(t, `US-005\s+paused`, status, "seed %d", seed)
	assert.Contains(t, status, "cannot build US-005", "seed %d: the escalation carries the cause", seed)
	assert.Regexp(t, `US-006\s+blocked`, status, "seed %d", seed)

	worktrees := f.git(t, "worktree", "list", "--porcelain")
	paths := 0
	for _, l := range strings.Split(worktrees, "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			paths++
			if p != f.repo {
				assert.Contains(t, p, "US-005", "seed %d: only the paused story's worktree is kept", seed)
			}
		}
	}
	assert.LessOrEqual(t, paths, 2, "seed %d: %s", seed, worktrees)
	assert.Empty(t, gitLocks(t, filepath.Join(f.repo, ".git")), "seed %d: no git lock file left", seed)
	assert.Empty(t, f.git(t, "status", "--porcelain"), "seed %d: main is clean", seed)
	assert.Empty(t, processesWith(t, "FOREMAN_CHAOS_TOKEN="+token), "seed %d: no agent process left", seed)
}

// gitLocks lists the *.lock files under a .git directory: a git process
// killed mid-write leaves one, and it stops every later write.
func gitLocks(t *testing.T, gitDir string) []string {
	t.Helper()
	var locks []string
	require.NoError(t, filepath.WalkDir(gitDir, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		// foreman.lock is merge's own lock, held with flock: it stays.
		if !d.IsDir() && strings.HasSuffix(path, ".lock") && d.Name() != "foreman.lock" {
			locks = append(locks, path)
		}
		return nil
	}))
	return locks
}

// processesWith lists the live processes (zombies excluded) other than
// this one whose environment carries entry.
func processesWith(t *testing.T, entry string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var found []string
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() || !alive(pid) {
			continue
		}
		env, err := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		if err != nil {
			continue
		}
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == entry {
				cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
				found = append(found, fmt.Sprintf("%d %s", pid, strings.ReplaceAll(string(cmdline), "\x00", " ")))
				break
			}
		}
	}
	return found
}

// skipUnlessLong skips a long run unless FOREMAN_STRESS is set, as CI sets
// it: a developer's go test ./... stays about a minute.
func skipUnlessLong(t *testing.T) {
	t.Helper()
	if v := os.Getenv("FOREMAN_STRESS"); v == "" || v == "0" {
		t.Skip("long end-to-end run: FOREMAN_STRESS=1 runs it (CI does)")
	}
}

// countLines counts the lines of a file, 0 if it does not exist yet.
func countLines(path string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), "\n")
}

// chaosSeeds reads how many chaos runs to make (runsVar, default runs) and
// the first run's seed (seedVar, default from the clock), and logs them.
func chaosSeeds(t *testing.T, runsVar string, runs int, seedVar string) (int, uint64) {
	t.Helper()
	if v := os.Getenv(runsVar); v != "" {
		n, err := strconv.Atoi(v)
		require.NoError(t, err, runsVar)
		runs = n
	}
	first := uint64(time.Now().UnixNano() % 1_000_000)
	if v := os.Getenv(seedVar); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		require.NoError(t, err, seedVar)
		first = n
	}
	t.Logf("%d runs, seeds %d to %d", runs, first, first+uint64(runs)-1)
	return runs, first
}
