package phases_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gitsnap"
)

// realServices wires the default services: a real agent subprocess, git
// snapshots, gate commands and feedback from their output.
func realServices(t *testing.T, argv []string) phases.PhaseServices {
	t.Helper()
	return phases.PhaseServices{
		AgentDriver: agentcmd.New(agentcmd.Config{
			Argv: argv, Env: demo.GitEnv(), KillGrace: 500 * time.Millisecond,
		}),
		Snapshotter:       gitsnap.New(gitsnap.Config{}),
		Verifier:          gates.NewVerifier(gates.VerifierConfig{}),
		FeedbackGenerator: gates.NewFeedbackGenerator(gates.FeedbackConfig{}),
		ResultPersister:   phases.NewFilePersister(filepath.Join(t.TempDir(), "runs")),
	}
}

func goGatePlan() phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}, Timeout: 2 * time.Minute}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "./..."}, Timeout: 2 * time.Minute}}},
	}}
}

// A scripted agent writes a buggy Add, the real gates fail, the feedback
// names the failing test, the agent reads it and fixes the bug: SUCCEEDED in
// two iterations with two commits on the workspace.
func TestIntegration_ScriptedAgentPassesAfterFeedback(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go vet and go test in a real repository")
	}
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, ws))
	script, err := demo.WriteScript(t.TempDir(), "agent.sh", demo.AddAgentScript)
	require.NoError(t, err)

	var lines []string
	loop := phases.NewRunLoop(phases.Config{Services: realServices(t, []string{script, "{prompt}"})})
	res, err := loop.Run(ctx, phases.RunRequest{
		ItemID: "calc-add", RunID: "run-1", WorkspacePath: ws,
		Task:   phases.TaskSpec{Prompt: "Add an Add function with a test.", GatePlan: goGatePlan()},
		Stream: func(e phases.StreamEvent) { lines = append(lines, e.Line) },
	})
	require.NoError(t, err)

	assert.Equal(t, phases.StateSucceeded, res.State, res.Message)
	assert.Equal(t, phases.EventVerifyPassed, res.FinalEvent)
	require.Len(t, res.Iterations, 2)
	first := res.Iterations[0].Result
	assert.Equal(t, phases.EventVerifyFailedRetryable, first.StateTransition)
	assert.Contains(t, first.NextFeedback, "TestAdd", "feedback must name the failing test")
	assert.Contains(t, first.NextFeedback, "Add(2, 3) = -1, want 5")
	assert.Equal(t, phases.EventVerifyPassed, res.Iterations[1].Result.StateTransition)
	assert.Contains(t, lines, "agent: feedback names TestAdd; fixing the operator")

	git := gitexec.Runner{}
	count, err := git.Run(ctx, ws, "rev-list", "--count", res.BeforeState.BaseCommit+"..HEAD")
	require.NoError(t, err)
	assert.Equal(t, "2", strings.TrimSpace(count))
	status, err := git.Run(ctx, ws, "status", "--porcelain")
	require.NoError(t, err)
	assert.Empty(t, status)
}

// An agent that hangs, having spawned a child, is stopped when the run's wall
// clock runs out: the run ends FAILED (wall_clock) and no process of the
// agent's group is left, the child included. The run's clock is a fake one,
// advanced past the limit only once the agent has written both PIDs, so a
// slow git snapshot or script start cannot use the limit up first; the
// agent's driver and its SIGTERM/SIGKILL escalation run on the real clock.
func TestIntegration_HangingAgentAndChildKilledAtTimeout(t *testing.T) {
	ctx := context.Background()
	ws := filepath.Join(t.TempDir(), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, ws))
	pidFile := filepath.Join(t.TempDir(), "pids")
	// Both PIDs appear at once (written aside, then renamed), then the agent hangs.
	script, err := demo.WriteScript(t.TempDir(), "hang.sh", "#!/bin/sh\nsleep 1000 &\n"+
		"{ echo $!; echo $$; } > "+demo.ShellQuote(pidFile+".tmp")+"\n"+
		"mv "+demo.ShellQuote(pidFile+".tmp")+" "+demo.ShellQuote(pidFile)+"\nwait\n")
	require.NoError(t, err)

	// An hour on the run's clock is never reached on the real one: the
	// driver's own timeout (the time left) cannot fire first.
	const limit = time.Hour
	clk := foreman.NewFakeClock(startTime())
	// Unsandboxed: the PIDs the agent writes must be the host's (a sandbox
	// has a PID namespace of its own; agentcmd's sandbox tests check that a
	// sandboxed agent's processes go with it).
	services := realServices(t, []string{script})
	services.AgentDriver = agentcmd.New(agentcmd.Config{Argv: []string{script}, Env: demo.GitEnv(), KillGrace: 500 * time.Millisecond,
		Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
	services.Clock = clk
	loop := phases.NewRunLoop(phases.Config{Services: services, Limits: phases.Limits{MaxWallClock: limit}})
	type outcome struct {
		res phases.RunResult
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := loop.Run(ctx, phases.RunRequest{
			ItemID: "hang", RunID: "run-hang", WorkspacePath: ws,
			Task: phases.TaskSpec{Prompt: "never finishes", GatePlan: goGatePlan()},
		})
		done <- outcome{res, err}
	}()

	// The run armed its wall-clock timer before it took the snapshot and
	// started the agent, so once the PIDs exist the limit can be reached.
	require.Eventually(t, func() bool {
		_, err := os.Stat(pidFile)
		return err == nil || len(done) > 0
	}, time.Minute, 10*time.Millisecond, "the agent never wrote its PIDs")
	require.Zero(t, len(done), "the run ended before the agent was ready")
	data, err := os.ReadFile(pidFile)
	require.NoError(t, err)
	pids := strings.Fields(string(data))
	require.Len(t, pids, 2, "the child's PID and the agent's")

	clk.Advance(limit)
	var o outcome
	select {
	case o = <-done:
	case <-time.After(time.Minute): // a bound on a hang, not a wait for timing
		t.Fatal("the run did not end when its wall clock ran out")
	}
	require.NoError(t, o.err)
	assert.Equal(t, phases.StateFailed, o.res.State)
	assert.Equal(t, phases.Reason("wall_clock"), o.res.Reason)
	for _, field := range pids {
		pid, err := strconv.Atoi(field)
		require.NoError(t, err)
		assertGone(t, pid)
	}
}

// assertGone waits (polling /proc, not sleeping a fixed time) until pid no
// longer runs: a killed process dies asynchronously. A killed child of the
// agent is re-parented to init, which reaps it; until then it is a zombie
// (state Z in /proc/<pid>/stat), which counts as gone.
func assertGone(t *testing.T, pid int) {
	t.Helper()
	assert.Eventually(t, func() bool { return !running(pid) }, 10*time.Second, 10*time.Millisecond,
		"process %d still running", pid)
}

func running(pid int) bool {
	if err := syscall.Kill(pid, 0); err == syscall.ESRCH {
		return false
	}
	stat, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false // exited between the two checks
	}
	// The state follows the parenthesised command name.
	fields := strings.Fields(string(stat[strings.LastIndexByte(string(stat), ')')+1:]))
	return len(fields) > 0 && fields[0] != "Z"
}
