package team_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// The host process of TestKilledHostFinishesThePlanOnRerun: the test
// binary re-executed with these variables runs a team to the end and
// prints every event as a JSON line.
const (
	envHostRepo   = "FOREMAN_TEST_HOST_REPO"
	envHostAgent  = "FOREMAN_TEST_HOST_AGENT"
	exitHostPause = 3
)

func TestMain(m *testing.M) {
	// No machine git configuration for every git the tests, the team and
	// the agents start (the fixtures' repositories turn git's auto
	// maintenance off: internal/testrepo).
	if err := testrepo.IsolateGit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	if repo := os.Getenv(envHostRepo); repo != "" {
		os.Exit(host(repo, os.Getenv(envHostAgent)))
	}
	os.Exit(m.Run())
}

// crashPlan has a dependency chain and two independent stories, so that
// kills land while stories wait, run in parallel, and merge.
var crashPlan = []team.Story{
	{ID: "S1", Title: "one"},
	{ID: "S2", Title: "two", After: []foreman.ItemID{"S1"}},
	{ID: "S3", Title: "three"},
	{ID: "S4", Title: "four", After: []foreman.ItemID{"S2", "S3"}},
}

func host(repo, agent string) int {
	var mu sync.Mutex
	out := json.NewEncoder(os.Stdout)
	cfg := team.Config{
		Repo: repo, Workers: 2, Gates: gatePlan(),
		// Unsandboxed: the test reads the agents' pids and checks none
		// outlives the plan, which needs the host's pids, not a sandbox's.
		// (A sandboxed agent dies with its host: examples/foreman's chaos
		// test kills sandboxed hosts.)
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{agent, "{prompt}"}, Env: demo.GitEnv(),
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}}),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig(), Author: merge.Identity{Name: demo.Identity().Name, Email: demo.Identity().Email}},
		OnEvent: func(e team.Event) {
			mu.Lock()
			defer mu.Unlock()
			_ = out.Encode(e)
		},
	}
	ctx := context.Background()
	tm, err := team.New(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	defer tm.Close()
	if err := tm.Add(ctx, crashPlan...); err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	res, err := tm.Run(ctx)
	if err != nil {
		fmt.Fprintln(os.Stderr, "host:", err)
		return 1
	}
	if res.Merged != len(crashPlan) {
		fmt.Fprintln(os.Stderr, "host:", res.String())
		for _, s := range res.Stories {
			if s.Pause != nil {
				fmt.Fprintf(os.Stderr, "%s: %s\n", s.ID, s.Pause.Message)
			}
		}
		return exitHostPause
	}
	return 0
}

// TestKilledHostFinishesThePlanOnRerun SIGKILLs a real host process
// running real subprocess agents after its k-th event, for k = 1, 3, 5,
// ..., restarting it each time, until a host finishes on its own. Every
// story must then be merged exactly once, and no agent process or
// worktree be left behind.
func TestKilledHostFinishesThePlanOnRerun(t *testing.T) {
	t.Parallel()
	stress.Long(t) // kills and restarts a host process a dozen times
	f := newFixture(t)
	slow := filepath.Join(filepath.Dir(f.ctl), "bin", "slow-agent.sh")
	// The agent records its pid and takes a moment, so that kills also
	// land while agents run (they outlive the host in their own process
	// group, and the next host must stop them before working there).
	require.NoError(t, os.WriteFile(slow, []byte("#!/bin/sh\necho $$ >> "+demo.ShellQuote(filepath.Join(f.ctl, "pids"))+
		"\nsleep 0.2\nexec "+demo.ShellQuote(filepath.Join(filepath.Dir(f.ctl), "bin", "agent.sh"))+" \"$@\"\n"), 0o755))

	// A kill lands a random moment after its event (seeded: the seed is
	// logged, FOREMAN_TEST_KILL_SEED replays it), so that kills also fall
	// inside agent runs, gate runs and merges, not only at event
	// boundaries.
	seed := time.Now().UnixNano()
	if s := os.Getenv("FOREMAN_TEST_KILL_SEED"); s != "" {
		var err error
		seed, err = strconv.ParseInt(s, 10, 64)
		require.NoError(t, err)
	}
	t.Logf("FOREMAN_TEST_KILL_SEED=%d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))
	var kills []int
	finished := false
	for k := 1; k <= 60 && !finished; k++ {
		events, exited := runHost(t, f.repo, slow, k, time.Duration(rng.IntN(300))*time.Millisecond)
		if exited {
			finished = true
			t.Logf("host finished on its own after %d kills (%d events in the last run)", len(kills), events)
			break
		}
		kills = append(kills, k)
	}
	if !finished {
		events, exited := runHost(t, f.repo, slow, 0, 0)
		require.True(t, exited, "the last host must finish (%d events)", events)
	}
	t.Logf("killed after events %v", kills)
	require.GreaterOrEqual(t, len(kills), 8, "the plan should take more than a handful of events")

	got := trailers(t, f.repo)
	assert.Len(t, got, len(crashPlan), "one squash commit per story: %v", got)
	assert.ElementsMatch(t, []string{"S1", "S2", "S3", "S4"}, got)
	wts, err := os.ReadDir(filepath.Join(f.repo, ".worktrees"))
	if err == nil {
		assert.Empty(t, wts, "no worktree left")
	}
	pids, err := os.ReadFile(filepath.Join(f.ctl, "pids"))
	require.NoError(t, err)
	for _, p := range strings.Fields(string(pids)) {
		pid, err := strconv.Atoi(p)
		require.NoError(t, err)
		if running(pid) {
			env, _ := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
			var fm []string
			for _, kv := range strings.Split(string(env), "\x00") {
				if strings.HasPrefix(kv, "FOREMAN_") {
					fm = append(fm, kv)
				}
			}
			cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
			t.Errorf("agent %d is still running: %q %v", pid, strings.ReplaceAll(string(cmd), "\x00", " ")[:min(80, len(cmd))], fm)
		}
	}
}

// runHost starts a host and SIGKILLs it delay after its killAfter-th
// event (0: never). It reports the events seen and whether the host exited on its
// own (successfully: a host that fails fails the test).
func runHost(t *testing.T, repo, agent string, killAfter int, delay time.Duration) (events int, exited bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), envHostRepo+"="+repo, envHostAgent+"="+agent)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	sc := bufio.NewScanner(stdout)
	killed := false
	for sc.Scan() {
		events++
		if killAfter > 0 && events == killAfter && !killed {
			killed = true
			p := cmd.Process
			time.AfterFunc(delay, func() { _ = p.Signal(syscall.SIGKILL) })
		}
	}
	err = cmd.Wait()
	if killed && err != nil {
		return events, false
	}
	require.NoError(t, err, "host failed: %s", stderr.String())
	return events, true
}

// running reports whether pid is a live process: not gone, and not a
// zombie (an orphan that exited after its host died waits for init to
// reap it, which some sandboxes' init does late).
func running(pid int) bool {
	if syscall.Kill(pid, 0) == syscall.ESRCH {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// "pid (comm) state ...": the state follows the last ')'.
	i := strings.LastIndexByte(string(stat), ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
