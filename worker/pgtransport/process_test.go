package pgtransport_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// runHostProcess is the worker host process the tests start by running
// their own binary again: it serves the queue until SIGTERM. Its agent
// reports a line of output, then works until a file named "release"
// appears in the assignment's worktree.
func runHostProcess() int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	pool, err := pgxpool.New(ctx, os.Getenv(envURL))
	if err != nil {
		fmt.Fprintln(os.Stderr, "host process:", err)
		return 2
	}
	defer pool.Close()
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		on(phases.StreamEvent{Kind: phases.StreamText, Line: "host process " + os.Getenv("PGTRANSPORT_TEST_HOST_NAME") + " working"})
		tick := time.NewTicker(20 * time.Millisecond) // the agent's own pace, not a test's wait
		defer tick.Stop()
		for {
			if _, err := os.Stat(filepath.Join(req.WorkspacePath, "release")); err == nil {
				return phases.AgentResult{Success: true}, nil
			}
			select {
			case <-ctx.Done():
				return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
			case <-tick.C:
			}
		}
	})
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{
		Pool: pool, Schema: os.Getenv("PGTRANSPORT_TEST_SCHEMA"), Name: os.Getenv("PGTRANSPORT_TEST_HOST_NAME"),
		PollInterval: 100 * time.Millisecond, Runtime: worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits},
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "host process:", err)
		return 2
	}
	fmt.Println("host process ready")
	if err := h.Run(ctx); err != nil && err != context.Canceled {
		fmt.Fprintln(os.Stderr, "host process:", err)
		return 1
	}
	return 0
}

// startHostProcess runs this test binary as a worker host process.
func startHostProcess(t *testing.T, e *env, name string) *exec.Cmd {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), hostProcessEnv+"=1", "PGTRANSPORT_TEST_SCHEMA="+e.schema, "PGTRANSPORT_TEST_HOST_NAME="+name)
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	require.NoError(t, cmd.Start())
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			_ = cmd.Process.Kill()
			_ = cmd.Wait()
		}
	})
	return cmd
}

// A worker host in another process claims the assignment, heartbeats for
// it, answers a probe and reports DONE; SIGTERM stops it cleanly.
func TestWorkerHostProcessClaimsHeartbeatsAndCompletes(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 100 * time.Millisecond}, in)
	proc := startHostProcess(t, e, "host-process-1")

	wt := t.TempDir()
	a := &worker.Assignment{ID: "a-proc-1", Worker: "w1", Item: "story-1", Prompt: "build it", Worktree: wt, Attempt: 1}
	require.NoError(t, c.Send(context.Background(), worker.Command{Kind: worker.CommandAssign, Worker: "w1", Assignment: a.ID, Assign: a}))
	hb := in.await(t, "a heartbeat from the host process", func(m worker.Message) bool { return m.Kind == worker.MsgHeartbeat })
	assert.Equal(t, foreman.WorkerID("w1"), hb.Worker)
	assert.Equal(t, a.ID, hb.Assignment)
	assert.Equal(t, "host-process-1", claimedBy(t, e, a.ID), "the other process holds the claim")
	in.await(t, "the running STATUS", func(m worker.Message) bool { return m.Kind == worker.MsgStatus && m.Status == worker.StatusRunning })

	require.NoError(t, c.Send(context.Background(), worker.Command{Kind: worker.CommandProbe, Worker: "w1", Assignment: a.ID, Reason: "alive?"}))
	in.await(t, "the probe's answer", func(m worker.Message) bool { return m.Kind == worker.MsgStatus && m.Status == worker.StatusAlive })

	require.NoError(t, os.WriteFile(filepath.Join(wt, "release"), nil, 0o644))
	done := in.await(t, "DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone })
	assert.Equal(t, a.ID, done.Assignment)
	assert.Equal(t, "", claimedBy(t, e, a.ID), "a final message ends the claim")

	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.Wait(), "the host process stops cleanly on SIGTERM")
}

// A host process that stops while it runs an assignment reports it FAILED,
// so the coordinator requeues it at once rather than waiting for a probe.
func TestStoppingHostProcessReportsItsRunsFailed(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 100 * time.Millisecond}, in)
	proc := startHostProcess(t, e, "host-process-2")
	a := &worker.Assignment{ID: "a-proc-2", Worker: "w1", Item: "story-2", Prompt: "build it", Worktree: t.TempDir(), Attempt: 1}
	require.NoError(t, c.Send(context.Background(), worker.Command{Kind: worker.CommandAssign, Worker: "w1", Assignment: a.ID, Assign: a}))
	in.await(t, "the running STATUS", func(m worker.Message) bool { return m.Kind == worker.MsgStatus })
	require.NoError(t, proc.Process.Signal(syscall.SIGTERM))
	require.NoError(t, proc.Wait())
	failed := in.await(t, "FAILED", func(m worker.Message) bool { return m.Kind == worker.MsgFailed })
	assert.Contains(t, failed.Reason, "host-process-2 stopped")
}
