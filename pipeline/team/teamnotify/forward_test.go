package teamnotify_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
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

// Delivery ids are unique across teams, and stable across restarts of one
// team's host: two teams notifying one receiver of their first run's end
// (the same Seq in each) send two ids; the same team reopened re-sends its
// notification under the id it had; the same repository started over (its
// state removed) is another team.
func TestDeliveryIDsAreUniqueAcrossTeamsAndStableAcrossRestarts(t *testing.T) {
	t.Parallel()
	first := func(tm *team.Team) teamnotify.Notification {
		t.Helper()
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		got := make(chan teamnotify.Notification, 10)
		go func() {
			_ = teamnotify.Forward(ctx, tm, teamnotify.ForwardConfig{Notifier: teamnotify.NotifierFunc(
				func(_ context.Context, n teamnotify.Notification) error { got <- n; return nil })})
		}()
		select {
		case n := <-got:
			return n
		case <-time.After(time.Minute):
			t.Fatal("no notification")
		}
		return teamnotify.Notification{}
	}
	open := func(f *teamtest.Fixture) *team.Team {
		tm, err := team.New(context.Background(), f.Config)
		require.NoError(t, err)
		return tm
	}
	fa, fb := teamtest.New(t, "Notify Test"), teamtest.New(t, "Notify Test")
	a, b := open(fa), open(fb)
	for _, tm := range []*team.Team{a, b} {
		require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "a"}))
		require.Equal(t, 1, runTeam(t, tm).Merged)
	}
	na, nb := first(a), first(b)
	require.Equal(t, teamnotify.KindRunFinished, na.Kind)
	require.Equal(t, na.Seq, nb.Seq, "the same event of two teams")
	assert.NotEqual(t, na.ID, nb.ID, "two teams, two ids")
	assert.NotEqual(t, na.Team, nb.Team)
	assert.Regexp(t, `^run_finished-\d+-[0-9a-f]{16}$`, na.ID)
	assert.Equal(t, teamnotify.TeamKey(a), na.Team)

	require.NoError(t, a.Close())
	again := open(fa)
	assert.Equal(t, na.ID, first(again).ID, "a restarted host re-sends under the same id")
	require.NoError(t, again.Close())
	require.NoError(t, b.Close())

	require.NoError(t, os.RemoveAll(filepath.Join(fa.Repo, team.StateDirName)))
	over := open(fa)
	t.Cleanup(func() { _ = over.Close() })
	assert.Empty(t, teamnotify.TeamKey(over), "no event yet")
	require.NoError(t, over.Add(context.Background(), team.Story{ID: "A2", Title: "a again"}))
	assert.NotEqual(t, na.Team, teamnotify.TeamKey(over), "the repository started over is another team")

	n, ok := teamnotify.Of("", "/r", team.Event{Seq: 3, Kind: team.EventStoryMerged})
	assert.False(t, ok, "a merge notifies nobody")
	assert.Zero(t, n)
}
