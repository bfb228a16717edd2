package main

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/pipeline/team"
)

// TestKilledHostResumesTheRealCLIsSession SIGKILLs the reference binary
// while the real Claude Code (and Codex) is mid-build (it has written a file; the model
// is answering its next request), and runs it again: the build stage
// resumes the CLI's own session (Claude Code --resume, codex exec resume: the session it announced
// before the kill), whose first request carries the conversation so far
// (the earlier tool call and its result), and the story merges once. The
// tokens Foreman reads are those served, each once (Codex), or all but
// the killed run's, which Claude Code never reports (a gap
// docs/performance.md names); Claude Code's cost likewise, at its price.
func TestKilledHostResumesTheRealCLIsSession(t *testing.T) {
	for _, cli := range []string{"claude", "codex"} {
		t.Run(cli, func(t *testing.T) {
			t.Parallel()
			killedHostResumes(t, cli)
		})
	}
}

func killedHostResumes(t *testing.T, cli string) {
	hold := make(chan struct{}) // never closed: the model "thinks" until the host is killed
	defer close(hold)
	var held atomic.Int32
	srv := modeltest.Start(t,
		stage("planner", "US-001", viaLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")),
		stage("validator", "US-001", viaLine("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 9.")),
		modeltest.Script{Name: "US-001 builder", Match: "You are the builder for story US-001:", Turns: []modeltest.Turn{
			build("US-001")[0],
			{Reply: func(modeltest.Input) modeltest.Turn {
				if held.Add(1) == 1 {
					return modeltest.Turn{Wait: hold, Text: "never served"}
				}
				// A fresh session, not the killed one resumed: fail fast.
				return modeltest.Say("a second session got this turn")
			}},
			build("US-001")[1],
			viaLine("Stage 2 COMPLETE for %s. Implementation done."),
		}},
	)
	env, binds := cliEnv(t, cli, srv)
	f := newFixture(t)
	require.NoError(t, os.WriteFile(f.plan, []byte("stories:\n  - id: US-001\n    title: First\n"), 0o644))
	args := append([]string{"-repo", f.repo, "-plan", f.plan, "-format", cli, "-http", "", "-gate", `sh -c '! grep -qs BAD *.txt'`}, binds...)

	cmd, stdout, stderr := f.command(t, args...)
	cmd.Env = env
	require.NoError(t, cmd.Start())
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	heldRequest := func() *modeltest.Request {
		for _, r := range srv.Requests() {
			if r.Script == "US-001 builder" && r.Turn == 1 {
				return &r
			}
		}
		return nil
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for heldRequest() == nil {
		select {
		case err := <-exited:
			t.Fatalf("foreman exited (%v) before the build's second request\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
		case <-tick.C: // the server's records are read again: a condition, not a timing assertion
		}
	}
	session := heldRequest().Session
	if cli == "claude" {
		// Claude Code writes its session's transcript a moment after it
		// sends the request: a kill before that loses the last tool call
		// from the session it resumes (the CLI's durability, not the
		// team's; seen once in CI). The kill waits for the call on disk.
		var callID string
		for _, r := range srv.Requests() {
			if r.Script == "US-001 builder" && r.Turn == 0 && len(r.Served.Calls) > 0 {
				callID = r.Served.Calls[0].ID
			}
		}
		require.NotEmpty(t, callID)
		for !transcriptHolds(filepath.Join(f.repo, ".foreman", "leases", "homes"), callID) {
			select {
			case err := <-exited:
				t.Fatalf("foreman exited (%v) before the transcript held the call\nstdout:\n%s\nstderr:\n%s", err, stdout, stderr)
			case <-tick.C: // the transcript is read again: a condition, not a timing assertion
			}
		}
	}
	require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
	<-exited
	before := len(srv.Requests())

	cmd2, stdout2, stderr2 := f.command(t, args...)
	cmd2.Env = env
	err := cmd2.Run()
	require.Equal(t, exitMerged, exitCode(t, err), "stdout:\n%s\nstderr:\n%s\nunmatched: %v", stdout2, stderr2, srv.Unmatched())
	assert.Equal(t, []string{"US-001"}, f.merged(t), "merged once")

	// The rerun's build went on in the same session, its first request
	// carrying the file the killed run wrote.
	var resumed *modeltest.Request
	for _, r := range srv.Requests()[before:] {
		if r.Script == "US-001 builder" {
			resumed = &r
			break
		}
	}
	require.NotNil(t, resumed, "the rerun's builder asked the model")
	assert.Equal(t, session, resumed.Session, "the CLI resumed its own session")
	wrote := srv.Requests()
	var callID string
	for _, r := range wrote[:before] {
		if r.Script == "US-001 builder" && r.Turn == 0 {
			require.NotEmpty(t, r.Served.Calls)
			callID = r.Served.Calls[0].ID
		}
	}
	require.NotEmpty(t, callID)
	assert.True(t, strings.Contains(string(resumed.Body), callID), "the resumed request carries the killed run's tool call %s", callID)
	assert.True(t, strings.Contains(string(resumed.Body), "US-001 was built"), "and its input")

	// Each served token is charged at most once. Codex reports its
	// thread's running total, which holds the killed run's turns: every
	// token is charged, once. Claude Code reports a run's usage when the
	// run ends, and its resumed run's (total_cost_usd included) leaves out
	// a run that was killed: the killed run's tokens are never charged
	// (the host, killed too, kept nothing of its stream).
	st, err := team.ReadStatus(context.Background(), team.Config{Repo: f.repo})
	require.NoError(t, err)
	price := func(u modeltest.Usage) float64 {
		return (4*float64(u.InputTokens) + 20*float64(u.OutputTokens) + 0.2*float64(u.CacheReadInputTokens) +
			5*float64(u.CacheCreationInputTokens)) / 1e6
	}
	total := func(u modeltest.Usage) int64 {
		return u.InputTokens + u.OutputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens
	}
	var killed modeltest.Usage
	for _, r := range wrote[:before] {
		if r.Script == "US-001 builder" {
			killed = killed.Add(r.Served.Usage)
		}
	}
	served := modeltest.Sum(srv.Requests())
	require.Positive(t, total(killed))
	if cli == "codex" {
		assert.Equal(t, total(served), st.Tokens, "every token served is charged, once")
		assert.Zero(t, st.CostUSD, "Codex reports no cost")
	} else {
		assert.Equal(t, total(served)-total(killed), st.Tokens, "every token served to a run that reported is charged, once")
		assert.InDelta(t, price(served)-price(killed), st.CostUSD, 1e-9, "and its cost, at Claude Code's price")
	}
	t.Logf("tokens: served %d (%d to the killed run), Foreman read %d; cost: served $%.6f, Foreman read $%.6f",
		total(served), total(killed), st.Tokens, price(served), st.CostUSD)
}

// transcriptHolds reports whether a session transcript (.jsonl) under the
// agents' homes in root names id.
func transcriptHolds(root, id string) bool {
	found := false
	_ = filepath.WalkDir(root, func(p string, e fs.DirEntry, err error) error {
		if err != nil || found || e.IsDir() || !strings.HasSuffix(p, ".jsonl") {
			return nil
		}
		if data, err := os.ReadFile(p); err == nil && strings.Contains(string(data), id) {
			found = true
		}
		return nil
	})
	return found
}
