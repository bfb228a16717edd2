package agentcmd

import (
	"context"
	"log/slog"
	"os"
	"os/exec"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
)

// assertGroupGone waits (by polling /proc, not by sleeping a fixed time) until no
// process of the group is running: a SIGKILLed process dies asynchronously.
func assertGroupGone(t *testing.T, pgid int) {
	t.Helper()
	assert.Eventually(t, func() bool { return len(liveGroupMembers(t, pgid)) == 0 }, 10*time.Second, 10*time.Millisecond,
		"processes of group %d still running: %v", pgid, liveGroupMembers(t, pgid))
}

func TestExecuteTimeoutKillsTheWholeGroup(t *testing.T) {
	dir := t.TempDir()
	// The background sleep inherits stdout; the foreground one is the
	// agent "hanging".
	agent := writeScript(t, dir, "agent", `
echo "leader $$"
sleep 1000 &
echo "child $!"
sleep 1000
`)
	rec := &recorder{}
	var group startedGroup
	// A real timeout: the real timer path is what is under test. It must
	// outlast sh starting and printing both pid lines on a loaded machine
	// (1 s did not always); the fake-clock test below orders the events exactly.
	res, err := New(Config{Argv: []string{agent}, Timeout: 3 * time.Second}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir, OnStart: group.onStart}, rec.callback)
	require.NoError(t, err)

	assert.True(t, res.TimedOut)
	assert.False(t, res.Success)
	assert.Equal(t, "SIGTERM", res.Signal)
	assert.Equal(t, -1, res.ExitCode)
	pidFromLine(t, rec.stdoutLines(), "leader")
	child := pidFromLine(t, rec.stdoutLines(), "child")
	assertGroupGone(t, group.get(t))
	if !sandboxedHere() { // else a pid of the sandbox's namespace, gone with it
		assert.False(t, processRunning(child), "child %d survived", child)
	}
}

// An agent that ignores SIGTERM is killed once the grace period is over. The
// fake clock makes the order of events certain: the timeout fires only after
// the agent is ready, and the grace period ends only when the test says so.
func TestExecuteSIGKILLsAfterGraceWhenSIGTERMIsIgnored(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `
trap '' TERM
echo "leader $$"
sleep 1000 &
echo "child $!"
echo ready
sleep 1000
`)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	const timeout, grace = time.Hour, 30 * time.Second
	ready := make(chan struct{})
	rec := &recorder{on: func(ev phases.StreamEvent) {
		if ev.Line == "ready" {
			close(ready)
		}
	}}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	advanced := make(chan error, 1)
	go func() {
		select {
		case <-ready:
		case <-ctx.Done():
			advanced <- ctx.Err()
			return
		}
		fake.Advance(timeout) // SIGTERM, ignored
		if err := fake.BlockUntil(ctx, 1); err != nil {
			advanced <- err
			return
		}
		fake.Advance(grace) // SIGKILL
		advanced <- nil
	}()

	var group startedGroup
	res, err := New(Config{Argv: []string{agent}, Clock: fake, KillGrace: grace}).Execute(ctx,
		phases.AgentRequest{WorkspacePath: dir, Timeout: timeout, OnStart: group.onStart}, rec.callback)
	require.NoError(t, err)
	require.NoError(t, <-advanced)

	assert.True(t, res.TimedOut)
	assert.Equal(t, "SIGKILL", res.Signal, "the leader ignored SIGTERM, so only SIGKILL can have ended it")
	assert.Equal(t, timeout+grace, res.Duration)
	assertGroupGone(t, group.get(t))
	child := pidFromLine(t, rec.stdoutLines(), "child")
	if !sandboxedHere() {
		assert.False(t, processRunning(child))
	}
}

// SIGTERM comes first: an agent that handles it gets to clean up and exit
// with a code of its own. (The sleeper lets go of stdout: a child can lose a
// SIGTERM that arrives between its fork and its exec, and then only the
// grace period, which this test never advances, would end it.)
func TestExecuteSIGTERMFirst(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `
trap 'echo "cleaning up"; exit 7' TERM
sleep 1000 >/dev/null 2>&1 &
echo ready
wait
`)
	fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	rec := &recorder{on: func(ev phases.StreamEvent) {
		if ev.Line == "ready" {
			fake.Advance(time.Minute)
		}
	}}
	res, err := New(Config{Argv: []string{agent}, Clock: fake}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir, Timeout: time.Minute}, rec.callback)
	require.NoError(t, err)
	assert.True(t, res.TimedOut)
	assert.False(t, res.Success)
	assert.Equal(t, 7, res.ExitCode)
	assert.Empty(t, res.Signal)
	assert.Equal(t, []string{"ready", "cleaning up"}, rec.stdoutLines())
}

func TestExecuteContextCancellation(t *testing.T) {
	dir := t.TempDir()
	agent := writeScript(t, dir, "agent", `
echo "leader $$"
sleep 1000 &
echo ready
sleep 1000
`)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	rec := &recorder{on: func(ev phases.StreamEvent) {
		if ev.Line == "ready" {
			cancel()
		}
	}}
	var group startedGroup
	res, err := New(Config{Argv: []string{agent}}).Execute(ctx, phases.AgentRequest{WorkspacePath: dir, OnStart: group.onStart}, rec.callback)
	require.ErrorIs(t, err, context.Canceled)
	assert.False(t, res.Success)
	assert.False(t, res.TimedOut)
	assert.Equal(t, "SIGTERM", res.Signal)
	assert.Contains(t, res.Output, "ready\n", "the partial result comes with the error")
	assertGroupGone(t, group.get(t))

	_, err = New(Config{Argv: []string{agent}}).Execute(ctx, phases.AgentRequest{WorkspacePath: dir}, nil)
	require.ErrorIs(t, err, context.Canceled, "an ended context starts nothing")
}

func TestExecuteCleansUpAfterAnAgentThatExits(t *testing.T) {
	tests := []struct {
		name   string
		script string
	}{
		{"leftover holds the output", "sleep 1000 &\necho \"child $!\"\n"},
		{"leftover let go of the output", "sleep 1000 >/dev/null 2>&1 &\necho \"child $!\"\n"},
		{"leftover ignores SIGTERM", "trap '' TERM\nsleep 1000 &\necho \"child $!\"\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			agent := writeScript(t, dir, "agent", "echo \"leader $$\"\n"+tt.script+"echo done\nexit 0\n")
			rec := &recorder{}
			var group startedGroup
			res, err := New(Config{Argv: []string{agent}, KillGrace: 100 * time.Millisecond}).Execute(context.Background(),
				phases.AgentRequest{WorkspacePath: dir, OnStart: group.onStart}, rec.callback)
			require.NoError(t, err)
			assert.True(t, res.Success, "the agent itself exited 0")
			assert.Equal(t, 0, res.ExitCode)
			assertGroupGone(t, group.get(t))
		})
	}
}

func TestExecuteAbandonsPipesHeldOutsideTheGroup(t *testing.T) {
	if _, err := exec.LookPath("setsid"); err != nil {
		t.Skip("setsid not installed")
	}
	dir := t.TempDir()
	// setsid puts the sleeper in a new session, out of reach of the group
	// signals, still holding stdout.
	agent := writeScript(t, dir, "agent", "setsid sleep 1000 &\necho \"escaped $!\"\nexit 0\n")
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, KillGrace: 50 * time.Millisecond}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: dir}, rec.callback)
	require.NoError(t, err)
	assert.True(t, res.Success)
	escaped := pidFromLine(t, rec.stdoutLines(), "escaped")
	if sandboxedHere() {
		return // a pid of the sandbox's namespace, which took it down with it
	}
	// The driver no longer waits for it, but the test cleans up after itself.
	if p, err := os.FindProcess(escaped); err == nil {
		_ = p.Kill()
	}
}

// logRecorder keeps the messages logged through it at Info and above.
type logRecorder struct {
	mu   sync.Mutex
	msgs []string
}

func (r *logRecorder) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelInfo }
func (r *logRecorder) WithAttrs([]slog.Attr) slog.Handler           { return r }
func (r *logRecorder) WithGroup(string) slog.Handler                { return r }
func (r *logRecorder) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.msgs = append(r.msgs, rec.Message)
	return nil
}

// An agent that exits leaving nothing behind is not signalled: when it is
// reaped, the ends of its output can still be on their way to the driver's
// readers, and the driver used to take that for a leftover process holding
// the output (it sent the empty group SIGTERM in 10-45 % of such runs).
func TestAnAgentThatLeavesNothingBehindIsNotSignalled(t *testing.T) {
	dir := t.TempDir()
	logs := &logRecorder{}
	d := New(Config{Argv: []string{"sh", "-c", "echo done; exit 0"}, Logger: slog.New(logs)})
	for range 50 {
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: dir}, nil)
		require.NoError(t, err)
		require.True(t, res.Success)
		require.Equal(t, "done\n", res.Output)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	assert.Empty(t, logs.msgs, "nothing to terminate, kill or abandon")
}
