package worker_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// lossyInbox stands between a Runtime and the Dispatcher and drops, for the
// first assignment it sees, the messages drop selects: a runtime whose
// heartbeats are lost, or one that is frozen altogether.
type lossyInbox struct {
	drop    func(worker.Message) bool
	dropped chan worker.Message

	mu     sync.Mutex
	d      *worker.Dispatcher
	target foreman.AssignmentID
}

func (l *lossyInbox) Deliver(ctx context.Context, m worker.Message) (worker.Disposition, error) {
	l.mu.Lock()
	if l.target == "" {
		l.target = m.Assignment
	}
	lose := m.Assignment == l.target && l.drop(m)
	d := l.d
	l.mu.Unlock()
	if lose {
		select {
		case l.dropped <- m:
		default:
		}
		return worker.Applied, nil
	}
	return d.Deliver(ctx, m)
}

// probeRig runs a real agent script through a Runtime whose messages pass
// through a lossyInbox, with the Dispatcher's deadlines on a fake clock.
func probeRig(t *testing.T, script string, drop func(worker.Message) bool) (*worker.Dispatcher, *foreman.FakeClock, *recorder, chan worker.Message) {
	t.Helper()
	clk := foreman.NewFakeClock(t0)
	rec := newRecorder()
	inbox := &lossyInbox{drop: drop, dropped: make(chan worker.Message, 64)}
	rt := worker.NewRuntime(worker.RuntimeConfig{Agent: scriptAgent(script), Clock: clk, OnEvent: rec.hook}, inbox)
	d, err := worker.New(worker.Config{MaxWorkers: 1, Transport: rt, Clock: clk, Escalator: rec.escalator(), OnEvent: rec.hook})
	require.NoError(t, err)
	inbox.mu.Lock()
	inbox.d = d
	inbox.mu.Unlock()
	t.Cleanup(func() { _ = d.Close() })
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "p", Worktree: gitRepo(t)}))
	return d, clk, rec, inbox.dropped
}

func isProbe(e worker.Event) bool {
	return e.Kind == worker.EventCommandSent && e.Command == worker.CommandProbe
}

func TestIntegrationRuntimeWhoseHeartbeatsAreLostAnswersTheProbeAndIsNotKilled(t *testing.T) {
	script := `exec sleep 600` // silent: no output, no commit
	d, clk, rec, _ := probeRig(t, script, func(m worker.Message) bool { return m.Kind == worker.MsgHeartbeat })
	started := rec.await(t, kind(worker.EventAgentStarted))
	require.NoError(t, clk.BlockUntil(context.Background(), 2)) // liveness and the runtime's ticker
	clk.Advance(45 * time.Second)
	rec.await(t, isProbe)
	answered := rec.await(t, kind(worker.EventProbeAnswered))
	assert.Equal(t, started.Assignment, answered.Assignment)
	assert.Equal(t, worker.MsgStatus, answered.Message)

	clk.Advance(2 * time.Minute) // past the probe timeout: nothing happens
	info, _ := d.Worker(started.Worker)
	assert.Equal(t, worker.Busy, info.State)
	assert.Equal(t, started.Assignment, info.Assignment)
	s := d.Stats()
	assert.Zero(t, s.Crashes)
	assert.Zero(t, s.Kills)
	require.NoError(t, worker.CheckInvariants(d))
}

func TestIntegrationFrozenRuntimeIsProbedThenKilledAndItsItemReassigned(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	// Attempt 1 sleeps behind a frozen runtime; attempt 2 finishes.
	// Its one line of output becomes a running STATUS that is lost too, but
	// tells the test the process is up.
	script := `if [ "$FOREMAN_ITERATION" = 1 ]; then echo $$ > ` + demo.ShellQuote(pidFile) + `; echo up; exec sleep 600; fi; echo done`
	d, clk, rec, dropped := probeRig(t, script, func(worker.Message) bool { return true })
	started := rec.await(t, kind(worker.EventAgentStarted))
	for m := <-dropped; m.Kind != worker.MsgStatus; m = <-dropped {
	}
	require.NoError(t, clk.BlockUntil(context.Background(), 2))
	clk.Advance(45 * time.Second)
	probe := rec.await(t, isProbe)
	assert.Equal(t, started.Assignment, probe.Assignment)
	clk.Advance(2 * time.Minute)

	dead := rec.await(t, kind(worker.EventWorkerDead))
	assert.Equal(t, started.Assignment, dead.Assignment)
	assert.Contains(t, dead.Reason, "probe timeout")
	exited := rec.await(t, func(e worker.Event) bool {
		return e.Kind == worker.EventAgentExited && e.Assignment == started.Assignment
	})
	assert.Contains(t, exited.Reason, "killed by SIGTERM")
	assert.True(t, processGone(readPID(t, pidFile)), "the agent's process group was terminated")
	done := rec.await(t, kind(worker.EventCompleted))
	assert.Equal(t, 2, done.Attempt)
	assert.NotEqual(t, started.Assignment, done.Assignment)
	assert.Equal(t, uint64(1), d.Stats().Crashes)
	select {
	case e := <-rec.escs:
		t.Fatalf("a crash within the budget is not escalated: %+v", e)
	default:
	}
	require.NoError(t, worker.CheckInvariants(d))
}
