package teamnotify_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

// newTeam makes a real repository and a team of the scripted agent
// (teamtest.AgentScript) on it,
// with stories A (merges) and C (its planner fails: it pauses).
func newTeam(t *testing.T) *team.Team {
	t.Helper()
	f := teamtest.New(t, "Notify Test")
	f.Touch(t, "C.fail-stage-0")
	tm, err := team.New(context.Background(), f.Config)
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
