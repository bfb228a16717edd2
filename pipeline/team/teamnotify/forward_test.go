package teamnotify_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

// agentScript plays every stage; <id>.fail-stage-N in the control
// directory makes it exit 3 at stage N (the story pauses).
const agentScript = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
stage=$FOREMAN_STAGE
if [ -e "$ctl/$id.fail-stage-$stage" ]; then echo "boom $stage" >&2; exit 3; fi
outcome=complete
case "$stage" in
1) outcome=go ;;
2) echo "$id was here" > "$id.txt"; git add "$id.txt" && git commit -qm "$id: its file" ;;
esac
printf '{"assignment":"%s","outcome":"%s"}\n' "$FOREMAN_ASSIGNMENT" "$outcome" > "$FOREMAN_RESULT"
`

// newTeam makes a real repository and a team of the scripted agent on it,
// with stories A (merges) and C (its planner fails: it pauses).
func newTeam(t *testing.T) *team.Team {
	t.Helper()
	dir := t.TempDir()
	repo, ctl := filepath.Join(dir, "repo"), filepath.Join(dir, "ctl")
	env := []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Notify Test", "GIT_AUTHOR_EMAIL=notify@foreman.invalid",
		"GIT_COMMITTER_NAME=Notify Test", "GIT_COMMITTER_EMAIL=notify@foreman.invalid"}
	for _, d := range []string{repo, ctl} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	for _, args := range [][]string{{"init", "-q", "-b", "main"}, {"commit", "-q", "--allow-empty", "-m", "start"}} {
		cmd := exec.Command("git", args...)
		cmd.Dir, cmd.Env = repo, append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, "%s", out)
	}
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "C.fail-stage-0"), nil, 0o644))
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(agentScript, "%CTL%", "'"+ctl+"'")), 0o755))
	tm, err := team.New(context.Background(), team.Config{
		Repo:  repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: env}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "files", Argv: []string{"sh", "-c", "ls *.txt"}},
		}}}},
		Merge: merge.Config{GitEnv: env[:2], Author: merge.Identity{Name: "Notify Test", Email: "notify@foreman.invalid"}},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "a"}, team.Story{ID: "C", Title: "c"}))
	return tm
}

func runTeam(t *testing.T, tm *team.Team) team.Result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	return res
}

// A real team's escalation and the end of its run reach a real HTTP
// receiver through the webhook, signed, in order.
func TestForwardSendsEscalationsAndRunEndsThroughAWebhook(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	r := newReceiver(t, 200)
	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret})
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	forwarded := make(chan error, 1)
	done := make(chan teamnotify.Notification, 10)
	go func() {
		forwarded <- teamnotify.Forward(ctx, tm, teamnotify.ForwardConfig{Notifier: w, OnDone: func(n teamnotify.Notification, err error) {
			assert.NoError(t, err)
			done <- n
		}})
	}()
	res := runTeam(t, tm)
	require.Equal(t, 1, res.Merged, res.String())
	require.Equal(t, 1, res.Paused)
	first, last := <-done, <-done
	cancel()
	assert.ErrorIs(t, <-forwarded, context.Canceled)

	assert.Equal(t, teamnotify.KindEscalation, first.Kind)
	assert.Equal(t, teamnotify.KindRunFinished, last.Kind)
	got := r.requests()
	require.Len(t, got, 2)
	var esc, fin teamnotify.Notification
	require.NoError(t, json.Unmarshal(got[0].body, &esc))
	require.NoError(t, json.Unmarshal(got[1].body, &fin))
	assert.Equal(t, "C", string(esc.Story))
	require.NotNil(t, esc.Escalation)
	assert.Equal(t, pipeline.ReasonStageError, esc.Escalation.Reason)
	assert.Contains(t, esc.Escalation.Message, "boom 0")
	assert.Equal(t, tm.Repo(), esc.Repo)
	assert.Equal(t, "1 merged, 1 paused, 0 skipped, 0 abandoned, 0 blocked, 0 pending", fin.Detail)
	for _, g := range got {
		verifyIndependently(t, g.header.Get(teamnotify.SignatureHeader), g.body)
	}
}

// A notifier that never answers holds nothing up: the team runs to its
// end, and Forward stops when its context ends.
func TestANotifierThatHangsNeverBlocksTheTeam(t *testing.T) {
	t.Parallel()
	tm := newTeam(t)
	called := make(chan struct{}, 10)
	hang := teamnotify.NotifierFunc(func(ctx context.Context, _ teamnotify.Notification) error {
		called <- struct{}{}
		<-ctx.Done()
		return ctx.Err()
	})
	ctx, cancel := context.WithCancel(context.Background())
	forwarded := make(chan error, 1)
	go func() { forwarded <- teamnotify.Forward(ctx, tm, teamnotify.ForwardConfig{Notifier: hang}) }()
	res := runTeam(t, tm)
	assert.Equal(t, 1, res.Merged, res.String())
	<-called // it got the escalation, and sits on it
	cancel()
	assert.ErrorIs(t, <-forwarded, context.Canceled)
	_, err := tm.Status(context.Background())
	require.NoError(t, err)
}

func TestForwardRefusesNoNotifier(t *testing.T) {
	err := teamnotify.Forward(context.Background(), nil, teamnotify.ForwardConfig{})
	assert.ErrorIs(t, err, teamnotify.ErrInvalidConfig)
}
