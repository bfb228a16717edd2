package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// A Claude Code agent that hits its rate limit (a recorded stream, see
// phases/agentcmd/testdata) is not a crash and not a stage failure: the
// worker pool backs off (on the fake clock) and runs the stage again,
// and the story merges.
func TestARateLimitedAgentIsRetriedAfterTheBackoff(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	// The recording is copied beside the script, a directory the sandbox
	// binds: the repository's testdata is hidden when the checkout is
	// under /tmp (the sandbox's /tmp is its own).
	recorded, err := os.ReadFile("../../phases/agentcmd/testdata/claude_rate_limit_event.jsonl")
	require.NoError(t, err)
	bin := filepath.Join(filepath.Dir(f.ctl), "bin")
	require.NoError(t, os.MkdirAll(bin, 0o755))
	fixture := filepath.Join(bin, "claude_rate_limit_event.jsonl")
	require.NoError(t, os.WriteFile(fixture, recorded, 0o644))
	script, err := demo.WriteScript(bin, "claude-like.sh", `#!/bin/sh
if [ "$FOREMAN_ROLE" = planner ] && [ ! -e `+demo.ShellQuote(filepath.Join(f.ctl, "limited"))+` ]; then
  : > `+demo.ShellQuote(filepath.Join(f.ctl, "limited"))+`
  cat `+demo.ShellQuote(fixture)+`
  exit 1
fi
`+demo.ShellQuote(filepath.Join(bin, "agent.sh"))+` "$@" >&2 || exit $?
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"s-1"}'
`)
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Format: agentcmd.FormatClaude, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
	clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	f.cfg.Clock = clk
	f.cfg.Workers = 2
	tm := f.newTeam(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))

	// Once the pool reports the rate limit, time moves to the end of the
	// backoff. The pool arms the backoff's timer before it reports (its
	// timers are armed under its lock, its events sent after), so one move
	// requeues the story: nothing waits on real time, nothing polls.
	ctx, stop := context.WithCancelCause(ctx)
	defer stop(nil)
	sub := tm.Subscribe(ctx, 0)
	go func() {
		for e := range sub {
			if e.Kind != team.EventWorker || !strings.Contains(e.Detail, "rate-limited") {
				continue
			}
			limited := tm.Dispatcher().RateLimited()
			clk.Set(limited.Until)
			if left := tm.Dispatcher().RateLimited().Items; left != 0 {
				stop(fmt.Errorf("the clock moved to the end of the backoff (%v) and %d of %d stories still back off", limited.Until, left, limited.Items))
			}
		}
	}()
	res, err := tm.Run(ctx)
	require.NoError(t, context.Cause(ctx))
	require.NoError(t, err)
	assert.Equal(t, 1, res.Merged, res.String())
	_, err = os.Stat(filepath.Join(f.ctl, "limited"))
	require.NoError(t, err, "the agent was rate-limited once")
	var limited int
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventWorker {
			assert.Contains(t, e.Detail, "rate-limited", "no other trouble: no crash, no stall")
			limited++
		}
	}
	assert.Equal(t, 1, limited)
	assert.Equal(t, 1, strings.Count(strings.Join(trailers(t, f.repo), ","), "A"))
}
