package worker_test

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// realAgentDispatcher runs script as the agent (a real subprocess through
// agentcmd) in a fresh worktree, on a fake clock for every deadline, and
// returns the events as they come.
func realAgentDispatcher(t *testing.T, script string, format agentcmd.Format, cfg worker.Config) (*worker.Dispatcher, *foreman.FakeClock, <-chan worker.Event, *[]worker.Escalation) {
	t.Helper()
	clk := foreman.NewFakeClock(t0)
	events := make(chan worker.Event, 1024)
	var escs []worker.Escalation
	cfg.MaxWorkers, cfg.Clock, cfg.Commits = 1, clk, worker.NoCommits
	cfg.Agent = agentcmd.New(agentcmd.Config{Format: format, Argv: []string{"sh", "-c", script}, Clock: clk, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
	cfg.OnEvent = func(e worker.Event) {
		if e.Escalation != nil {
			escs = append(escs, *e.Escalation)
		}
		events <- e
	}
	d, err := worker.New(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = d.Close() })
	ws := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(ws, "main.go"), []byte("package main\n"), 0o644))
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "work", Worktree: ws}))
	return d, clk, events, &escs
}

func waitEvent(t *testing.T, events <-chan worker.Event, kind worker.EventKind) worker.Event {
	t.Helper()
	timeout := time.After(30 * time.Second)
	for {
		select {
		case e := <-events:
			if e.Kind == kind {
				return e
			}
		case <-timeout:
			t.Fatalf("no %s event", kind)
		}
	}
}

// cpuOf reads the CPU time of pid from /proc (user + system).
func cpuOf(t *testing.T, pid int) time.Duration {
	data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(data)[strings.LastIndexByte(string(data), ')')+1:])
	ut, _ := strconv.Atoi(f[14-3])
	st, _ := strconv.Atoi(f[15-3])
	return time.Duration(ut+st) * 10 * time.Millisecond
}

// readPid waits for the agent to write its pid to file.
func readPid(t *testing.T, file string) int {
	t.Helper()
	var pid int
	require.Eventually(t, func() bool {
		b, err := os.ReadFile(file)
		if err != nil {
			return false
		}
		pid, err = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil
	}, 30*time.Second, 5*time.Millisecond)
	return pid
}

// A real agent that computes without committing or printing (a long build)
// is slow, not stuck: its CPU time is evidence, so its first progress
// deadline extends it once; at the second it is killed as stuck. Deadlines
// run on the fake clock; only the busy loop's CPU time is real.
func TestRealBusyAgentIsExtendedOnceThenKilled(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	const minCPU = 100 * time.Millisecond
	d, clk, events, escs := realAgentDispatcher(t,
		"echo $$ > "+demo.ShellQuote(pidFile)+"; exec sh -c 'while :; do :; done'", agentcmd.FormatText,
		worker.Config{LivenessTimeout: -1, SlowWorkerMinCPU: minCPU})
	waitEvent(t, events, worker.EventAgentStarted)
	pid := readPid(t, pidFile)

	burn := func() {
		start := cpuOf(t, pid)
		require.Eventually(t, func() bool { return cpuOf(t, pid)-start >= 2*minCPU }, 30*time.Second, 10*time.Millisecond,
			"the busy loop burns CPU")
	}
	burn()
	clk.Advance(15 * time.Minute)
	slow := waitEvent(t, events, worker.EventSlowWorker)
	assert.Contains(t, slow.Reason, "CPU time")
	assert.Equal(t, 15*time.Minute, slow.Delay)
	assert.Empty(t, *escs, "extended, not killed")

	burn()
	clk.Advance(15 * time.Minute)
	stalled := waitEvent(t, events, worker.EventWorkerStalled)
	assert.Contains(t, stalled.Reason, "after 1 extension(s) as a slow worker")
	waitEvent(t, events, worker.EventAgentExited)
	st := d.Stats()
	assert.Equal(t, uint64(1), st.SlowExtensions)
	assert.Equal(t, uint64(1), st.Stalls)
}

// A real agent that sleeps shows no evidence of work: at its progress
// deadline it is killed as stuck, as before slow workers were recognised.
func TestRealSleepingAgentIsKilledAtItsDeadline(t *testing.T) {
	pidFile := filepath.Join(t.TempDir(), "pid")
	d, clk, events, _ := realAgentDispatcher(t,
		"echo $$ > "+demo.ShellQuote(pidFile)+"; exec sleep 600", agentcmd.FormatText,
		worker.Config{LivenessTimeout: -1, SlowWorkerMinCPU: 100 * time.Millisecond})
	waitEvent(t, events, worker.EventAgentStarted)
	readPid(t, pidFile)
	clk.Advance(15 * time.Minute)
	stalled := waitEvent(t, events, worker.EventWorkerStalled)
	assert.Contains(t, stalled.Reason, "no evidence of work")
	waitEvent(t, events, worker.EventAgentExited)
	assert.Equal(t, uint64(0), d.Stats().SlowExtensions)
}

// Real agents fed recorded Claude Code and Codex output reach the states
// beyond alive and dead: rate-limited (backing off until the named reset,
// no crash counted) and waiting for a person (NEEDS_PERSON with the
// question, no crash counted).
func TestRealAgentOutputReachesRateLimitedAndWaitingForAPerson(t *testing.T) {
	fixture := func(name string) string {
		p, err := filepath.Abs(filepath.Join("..", "phases", "agentcmd", "testdata", name))
		require.NoError(t, err)
		return p
	}
	t.Run("claude rate limited until resetsAt", func(t *testing.T) {
		d, _, events, escs := realAgentDispatcher(t, "cat "+demo.ShellQuote(fixture("claude_rate_limit_event.jsonl"))+"; exit 1",
			agentcmd.FormatClaude, worker.Config{RateLimitJitter: -1})
		ev := waitEvent(t, events, worker.EventRateLimited)
		assert.True(t, time.Unix(1771390800, 0).Equal(ev.ResetsAt))
		assert.Equal(t, time.Unix(1771390800, 0).Sub(t0), ev.Delay, "waits until the reset the provider named")
		info, _ := d.Item("story-a")
		assert.Equal(t, worker.RateLimited, info.State)
		assert.Equal(t, 0, info.Crashes)
		assert.Empty(t, *escs)
	})
	t.Run("codex usage limit read from its text", func(t *testing.T) {
		d, _, events, _ := realAgentDispatcher(t, "cat "+demo.ShellQuote(fixture("codex_usage_limit.jsonl"))+"; exit 1",
			agentcmd.FormatCodex, worker.Config{RateLimitJitter: -1})
		ev := waitEvent(t, events, worker.EventRateLimited)
		// "try again at 3:28 PM" on the fake clock's day, in its zone.
		assert.Equal(t, time.Date(2026, 2, 12, 15, 28, 0, 0, time.UTC), ev.ResetsAt)
		assert.Equal(t, 1, d.RateLimited().Items)
	})
	for _, tt := range []struct{ name, fixture, question string }{
		{"claude AskUserQuestion", "claude_ask_user_question.jsonl", "Which language do you prefer? (Go / Rust)"},
		{"claude Bash refused", "claude_permission_denied.jsonl", ""},
		{"codex request_user_input", "codex_request_user_input.jsonl", "Should the migration keep the old users table? (Keep it / Drop it)"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			format, exit := agentcmd.FormatClaude, "0"
			if strings.HasPrefix(tt.fixture, "codex") {
				format = agentcmd.FormatCodex
			}
			if tt.question == "" {
				exit = "1" // refused and failed: the permission is what it waits for
			}
			d, _, events, escs := realAgentDispatcher(t, "cat "+demo.ShellQuote(fixture(tt.fixture))+"; exit "+exit, format, worker.Config{})
			waitEvent(t, events, worker.EventWaitingForPerson)
			waitEvent(t, events, worker.EventParked)
			require.Len(t, *escs, 1)
			e := (*escs)[0]
			assert.Equal(t, worker.NeedsPerson, e.Kind)
			if tt.question != "" {
				assert.Equal(t, tt.question, e.Question)
			} else {
				assert.Equal(t, "Permission refused: Bash make release", e.Question)
			}
			assert.Equal(t, uint64(0), d.Stats().Crashes)
		})
	}
}
