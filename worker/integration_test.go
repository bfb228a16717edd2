package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Integration with real subprocess agents: shell scripts run by agentcmd,
// in a real git worktree, supervised by the Runtime. The Dispatcher's
// deadlines run on a fake clock; agentcmd's kill grace is real.

// recorder collects the events of a Dispatcher and its Runtime. Events
// arrive from several goroutines (the Dispatcher's effects, the Runtime's
// supervisors), so their order across assignments is not fixed: attempt 2
// may complete before attempt 1's EventAgentExited is reported. await
// therefore keeps every event it has not returned and searches all of them,
// never dropping one that a later await may want.
type recorder struct {
	mu      sync.Mutex
	backlog []worker.Event // events not yet returned by await, in order
	arrived chan struct{}  // signalled (capacity 1) when an event arrives
	escs    chan worker.Escalation
	guard   time.Duration
}

func newRecorder() *recorder {
	return &recorder{arrived: make(chan struct{}, 1), escs: make(chan worker.Escalation, 16), guard: 30 * time.Second}
}

// hook never blocks: a hook that blocked would stall the Dispatcher.
func (r *recorder) hook(e worker.Event) {
	r.mu.Lock()
	r.backlog = append(r.backlog, e)
	r.mu.Unlock()
	select {
	case r.arrived <- struct{}{}:
	default:
	}
}

func (r *recorder) escalator() worker.Escalator {
	return worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error { r.escs <- e; return nil })
}

// take removes and returns the earliest event in the backlog matching ok.
func (r *recorder) take(ok func(worker.Event) bool) (worker.Event, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for i, e := range r.backlog {
		if ok(e) {
			r.backlog = append(r.backlog[:i], r.backlog[i+1:]...)
			return e, true
		}
	}
	return worker.Event{}, false
}

// await returns the earliest event matching ok that no earlier await
// returned, waiting for it if need be; events that do not match stay for
// later awaits. The guard only stops a hang.
func (r *recorder) await(t *testing.T, ok func(worker.Event) bool) worker.Event {
	t.Helper()
	guard := time.NewTimer(r.guard)
	defer guard.Stop()
	for {
		if e, found := r.take(ok); found {
			return e
		}
		select {
		case <-r.arrived:
		case <-guard.C:
			t.Fatal("event never came")
		}
	}
}

func kind(k worker.EventKind) func(worker.Event) bool {
	return func(e worker.Event) bool { return e.Kind == k }
}

// gitRepo is a repository with one empty commit on main (written without
// git: internal/testrepo).
func gitRepo(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	_, err := testrepo.New(dir, "main", testrepo.Commit{Message: "base", Author: gitexec.Identity{Name: "t", Email: "t@example.com"}})
	require.NoError(t, err)
	return dir
}

func scriptAgent(script string) *agentcmd.Driver {
	return agentcmd.New(agentcmd.Config{Argv: []string{"sh", "-c", script}, KillGrace: 200 * time.Millisecond,
		// The pids these tests read and signal must be the host's: no
		// sandbox, whose PID namespace is its own.
		Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
}

func readPID(t *testing.T, path string) int {
	t.Helper()
	b, err := os.ReadFile(path)
	require.NoError(t, err)
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	require.NoError(t, err)
	return pid
}

// pidPipe makes a named pipe an agent writes its pid to, and returns its
// path and a function that waits for that pid. The write blocks the agent
// until the test reads it, so a test that waits for the pid knows the agent
// is running before it moves the fake clock on.
func pidPipe(t *testing.T) (string, func() int) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "pid")
	require.NoError(t, syscall.Mkfifo(path, 0o600))
	got := make(chan []byte, 1)
	go func() {
		b, _ := os.ReadFile(path) // returns at the writer's close
		got <- b
	}()
	return path, func() int {
		t.Helper()
		select {
		case b := <-got:
			pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
			require.NoError(t, err, "the agent wrote %q", b)
			return pid
		case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
			t.Fatal("the agent never wrote its pid")
			return 0
		}
	}
}

func processGone(pid int) bool {
	return syscall.Kill(pid, 0) == syscall.ESRCH
}

func TestIntegrationAgentThatHeartbeatsButNeverProgressesIsKilledAndItsItemReassigned(t *testing.T) {
	wt := gitRepo(t)
	pidFile, agentPID := pidPipe(t)
	// Attempt 1 sleeps silently: no output, no commit. Attempt 2 finishes.
	script := `if [ "$FOREMAN_ITERATION" = 1 ]; then echo $$ > ` + demo.ShellQuote(pidFile) + `; exec sleep 600; fi; echo done`
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
	// The agent must be running before the clock moves: on a fast machine
	// the 15 minutes pass before sh has started otherwise.
	pid := agentPID()

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
	assert.True(t, processGone(pid), "the agent's process group was terminated")
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
	script := `trap '' TERM; echo $$ > ` + demo.ShellQuote(pidFile) + `; echo started; while :; do sleep 1; done`
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

// TestRecorderKeepsEventsThatDidNotMatch pins down the order the
// integration tests meet in practice: the second attempt completes before
// the first attempt's exit is reported. Waiting for the exit must not throw
// the completion away.
func TestRecorderKeepsEventsThatDidNotMatch(t *testing.T) {
	rec := newRecorder()
	rec.hook(worker.Event{Kind: worker.EventHeartbeat, Assignment: "a-2"})
	rec.hook(worker.Event{Kind: worker.EventCompleted, Assignment: "a-2", Attempt: 2})
	rec.hook(worker.Event{Kind: worker.EventAgentExited, Assignment: "a-1"})

	exited := rec.await(t, kind(worker.EventAgentExited))
	assert.Equal(t, foreman.AssignmentID("a-1"), exited.Assignment)
	done := rec.await(t, kind(worker.EventCompleted))
	assert.Equal(t, 2, done.Attempt)
	hb := rec.await(t, kind(worker.EventHeartbeat))
	assert.Equal(t, foreman.AssignmentID("a-2"), hb.Assignment)

	go rec.hook(worker.Event{Kind: worker.EventCompleted, Assignment: "a-3", Attempt: 3})
	assert.Equal(t, 3, rec.await(t, kind(worker.EventCompleted)).Attempt, "a later event is waited for")
}
