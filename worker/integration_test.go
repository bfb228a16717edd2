package worker_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Integration with real subprocess agents: shell scripts run by agentcmd,
// in a real git worktree, supervised by the Runtime. The Dispatcher's
// deadlines run on a fake clock; agentcmd's kill grace is real.

type recorder struct {
	events chan worker.Event
	escs   chan worker.Escalation
}

func newRecorder() *recorder {
	return &recorder{events: make(chan worker.Event, 4096), escs: make(chan worker.Escalation, 16)}
}

func (r *recorder) hook(e worker.Event) { r.events <- e }

func (r *recorder) escalator() worker.Escalator {
	return worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error { r.escs <- e; return nil })
}

// await returns the first event matching ok; the timeout only guards
// against a hang.
func (r *recorder) await(t *testing.T, ok func(worker.Event) bool) worker.Event {
	t.Helper()
	guard := time.NewTimer(30 * time.Second)
	defer guard.Stop()
	for {
		select {
		case e := <-r.events:
			if ok(e) {
				return e
			}
		case <-guard.C:
			t.Fatal("event never came")
		}
	}
}

func kind(k worker.EventKind) func(worker.Event) bool {
	return func(e worker.Event) bool { return e.Kind == k }
}

func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"},
		{"commit", "-q", "--allow-empty", "-m", "base"},
	} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com",
			"GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	return dir
}

func scriptAgent(script string) *agentcmd.Driver {
	return agentcmd.New(agentcmd.Config{Argv: []string{"sh", "-c", script}, KillGrace: 200 * time.Millisecond})
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}

func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func TestIntegrationAgentThatHeartbeatsButNeverProgressesIsKilledAndItsItemReassigned(t *testing.T) {
	wt := gitRepo(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	// Attempt 1 sleeps silently: no output, no commit. Attempt 2 finishes.
	script := `if [ "$FOREMAN_ITERATION" = 1 ]; then echo $$ > ` + pidFile + `; exec sleep 600; fi; echo done`
	clk := foreman.NewFakeClock(t0)
	rec := newRecorder()
	d, err := worker.New(worker.Config{MaxWorkers: 1, Agent: scriptAgent(script), Clock: clk,
		Escalator: rec.escalator(), OnEvent: rec.hook})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "p", Worktree: wt}))
	first := rec.await(t, kind(worker.EventHeartbeat)) // the runtime's first heartbeat, with HEAD
	require.NoError(t, clk.BlockUntil(context.Background(), 2))
	info, _ := d.Worker(first.Worker)
	require.Len(t, info.LastCommit, 40, "heartbeats carry the worktree's HEAD")

	// The runtime heartbeats every 10 s for 15 minutes; the agent does nothing.
	for range 89 {
		clk.Advance(10 * time.Second)
		rec.await(t, kind(worker.EventHeartbeat))
	}
	select {
	case e := <-rec.escs:
		t.Fatalf("escalated early: %+v", e)
	default:
	}
	clk.Advance(10 * time.Second)
	esc := <-rec.escs
	assert.Equal(t, worker.StuckWorker, esc.Kind)
	assert.Equal(t, first.Assignment, esc.Assignment)
	assert.True(t, esc.Requeued)

	exited := rec.await(t, func(e worker.Event) bool {
		return e.Kind == worker.EventAgentExited && e.Assignment == first.Assignment
	})
	assert.Contains(t, exited.Reason, "killed by SIGTERM")
	assert.True(t, processGone(readPID(t, pidFile)), "the agent's process group was terminated")
	done := rec.await(t, kind(worker.EventCompleted))
	assert.Equal(t, 2, done.Attempt, "reassigned and finished by the second attempt")
	assert.NotEqual(t, first.Assignment, done.Assignment)
	require.NoError(t, worker.CheckInvariants(d))
	require.NoError(t, d.Close())
}

func TestIntegrationCrashingAgentIsRetriedThenEscalated(t *testing.T) {
	wt := gitRepo(t)
	// Attempt 1 exits non-zero; attempt 2 is killed by a signal.
	script := `if [ "$FOREMAN_ITERATION" = 1 ]; then echo oops >&2; exit 3; fi; kill -9 $$`
	rec := newRecorder()
	d, err := worker.New(worker.Config{MaxWorkers: 2, Agent: scriptAgent(script), Clock: foreman.NewFakeClock(t0),
		Escalator: rec.escalator(), OnEvent: rec.hook})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "p", Worktree: wt}))
	f1 := rec.await(t, kind(worker.EventFailed))
	assert.Equal(t, "exit 3", f1.Reason)
	f2 := rec.await(t, kind(worker.EventFailed))
	assert.Equal(t, "killed by SIGKILL", f2.Reason)
	esc := <-rec.escs
	assert.Equal(t, worker.CrashLimit, esc.Kind)
	assert.Equal(t, 2, esc.Crashes)
	info, ok := d.Item("story-a")
	require.True(t, ok)
	assert.Equal(t, worker.Parked, info.State)
	require.NoError(t, worker.CheckInvariants(d))
	for _, w := range d.Workers() {
		assert.Equal(t, worker.Idle, w.State)
	}
}

func TestIntegrationAgentIgnoringSIGTERMIsKilledAfterTheGracePeriod(t *testing.T) {
	wt := gitRepo(t)
	pidFile := filepath.Join(t.TempDir(), "pid")
	script := `trap '' TERM; echo $$ > ` + pidFile + `; echo started; while :; do sleep 1; done`
	rec := newRecorder()
	d, err := worker.New(worker.Config{MaxWorkers: 1, Agent: scriptAgent(script), Clock: foreman.NewFakeClock(t0),
		OnEvent: rec.hook})
	require.NoError(t, err)
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "p", Worktree: wt}))
	rec.await(t, func(e worker.Event) bool { return e.Kind == worker.EventProgress && e.Reason == "first running status" })
	pid := readPID(t, pidFile)

	require.NoError(t, d.Close(), "every worker stopped")
	exited := rec.await(t, kind(worker.EventAgentExited))
	assert.Contains(t, exited.Reason, "killed by SIGKILL", "SIGTERM was ignored; SIGKILL after the grace")
	assert.True(t, processGone(pid))
	info, ok := d.Item("story-a")
	require.True(t, ok)
	assert.Equal(t, worker.Queued, info.State, "the interrupted item is not lost")
}
