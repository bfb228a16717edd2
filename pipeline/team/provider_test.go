package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// claudeLikeAgent prints Claude Code's stream-json as the real CLI does
// (success results, api_retry lines, permission_denials) and reports
// through the result file. Its builder, for a story with a control file:
//
//	<id>.refused  is refused Write and Bash, changes nothing, and still ends
//	              "subtype":"success" (Claude Code's default permission mode
//	              in -p mode)
//	<id>.exit1    builds and commits, then exits 1 ("nothing to commit")
//	<id>.broken   exits 1 at once with "unknown option" on stderr
//	<id>.retry    announces two API retries (429), then waits for the FIFO
//	              <id>.go before it builds
const claudeLikeAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
echo "$id $FOREMAN_ROLE" >> "$ctl/log"
echo '{"type":"system","subtype":"init","session_id":"7c1d7d5e-8f32-4a55-9a53-0b5c2f3e4d11","model":"claude-sonnet-4-5"}'
result() { printf '{"type":"result","subtype":"success","is_error":false,"result":"done","session_id":"7c1d7d5e-8f32-4a55-9a53-0b5c2f3e4d11","total_cost_usd":0.01,"usage":{"input_tokens":10,"output_tokens":5},"permission_denials":[%s]}\n' "${1:-}"; }
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4'; result ;;
validator) report go ',"score":9'; result ;;
*)
  if [ -e "$ctl/$id.refused" ]; then
    result '{"tool_name":"Write","tool_use_id":"toolu_1","tool_input":{"file_path":"'"$PWD"'/x.go","content":"package x"}},{"tool_name":"Bash","tool_use_id":"toolu_2","tool_input":{"command":"git commit -am x"}}'
    exit 0
  fi
  if [ -e "$ctl/$id.broken" ]; then echo "error: unknown option '--frobnicate'" >&2; exit 1; fi
  if [ -e "$ctl/$id.retry" ]; then
    echo '{"type":"system","subtype":"api_retry","attempt":1,"max_retries":10,"retry_delay_ms":500,"error_status":429,"error":"rate_limit","session_id":"s"}'
    echo '{"type":"system","subtype":"api_retry","attempt":2,"max_retries":10,"retry_delay_ms":1000,"error_status":429,"error":"rate_limit","session_id":"s"}'
    cat "$ctl/$id.go" > /dev/null
  fi
  echo ok > "$id.txt"; git add -A; git commit -qm "$id"
  if [ -e "$ctl/$id.exit1" ]; then echo "nothing to commit, working tree clean" >&2; exit 1; fi
  report complete; result ;;
esac
`

func newClaudeLikeFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "claude-like.sh", strings.ReplaceAll(claudeLikeAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script}, Format: agentcmd.FormatClaude, PromptVia: agentcmd.PromptStdin, Env: demo.GitEnv(),
		Sandbox: ctlSandbox(f.ctl)})
	return f
}

func TestARefusedAgentThatChangedNothingPausesAtOnceNamingTheTools(t *testing.T) {
	f := newClaudeLikeFixture(t)
	f.touch(t, "R.refused")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "R", Title: "refused"}, team.Story{ID: "OK", Title: "fine"}))

	res := run(t, tm)

	assert.Equal(t, team.StoryMerged, stateOf(res, "OK").State)
	r := stateOf(res, "R")
	require.Equal(t, team.StoryPaused, r.State)
	require.NotNil(t, r.Pause)
	assert.Contains(t, r.Pause.Message, "build failed after 1 iteration(s) (permission_denied)")
	assert.Contains(t, r.Pause.Message, "the agent was refused Write ("+filepath.Join(f.repo, ".worktrees")) // the file it wanted
	assert.Contains(t, r.Pause.Message, "Bash (git commit -am x)")
	assert.Contains(t, r.Pause.Message, "--allowedTools", "what to grant")
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(log), "R builder"), "an identical refusal is not retried:\n%s", log)
}

func TestAnAgentRetryingItsModelAPIShowsInStatusAndIsNotAFailure(t *testing.T) {
	f := newClaudeLikeFixture(t)
	f.touch(t, "W.retry")
	require.NoError(t, syscall.Mkfifo(filepath.Join(f.ctl, "W.go"), 0o600))
	retrying := make(chan team.Event, 1)
	f.cfg.OnEvent = func(ev team.Event) {
		if ev.Kind == team.EventWorker && ev.Outcome == "RETRYING" {
			select {
			case retrying <- ev:
			default:
			}
		}
	}
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "W", Title: "waits for the API"}))

	wait := runInBackground(t, tm)
	ev := <-retrying
	assert.Equal(t, "the agent's CLI is retrying its model API by itself: model API 429 rate_limit: retry 1 of 10 in 500ms", ev.Detail)

	// The agent now waits on its FIFO, after its second retry line.
	var w *team.ProviderRetry
	for w == nil || w.Retries < 2 {
		st, err := tm.Status(context.Background())
		require.NoError(t, err)
		w = stateOf(team.Result{Stories: st.Stories}, "W").Retrying
	}
	assert.Equal(t, "model API 429 rate_limit: retry 2 of 10 in 1s", w.Detail)
	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	assert.Contains(t, st.Text(), "waiting for the model API since")

	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "W.go"), []byte("go\n"), 0o600))
	res := wait()
	s := stateOf(res, "W")
	assert.Equal(t, team.StoryMerged, s.State)
	assert.Nil(t, s.Retrying, "cleared once the stage ended")
}

func TestABuildIsJudgedByItsEvidenceNotItsAgentsExitStatus(t *testing.T) {
	f := newClaudeLikeFixture(t)
	f.touch(t, "E.exit1")
	f.touch(t, "X.broken")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "E", Title: "exits 1 after its work"}, team.Story{ID: "X", Title: "broken agent"}))

	res := run(t, tm)

	assert.Equal(t, team.StoryMerged, stateOf(res, "E").State, "its commit passed the gates")
	x := stateOf(res, "X")
	require.Equal(t, team.StoryPaused, x.State)
	require.NotNil(t, x.Pause)
	assert.Contains(t, x.Pause.Message, "(no_changes)")
	assert.Contains(t, x.Pause.Message, "the agent exited with status 1")
	assert.Contains(t, x.Pause.Message, "unknown option '--frobnicate'", "the cause, from its stderr")
}
