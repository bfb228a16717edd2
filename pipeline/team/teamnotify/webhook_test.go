package teamnotify_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

var secret = []byte("a-shared-secret-of-32-bytes-----")

// receiver is a real HTTP server that answers with the statuses given, in
// turn (the last one for every later request), and keeps what it got.
type receiver struct {
	srv *httptest.Server

	mu       sync.Mutex
	statuses []int
	got      []received
	arrived  chan struct{} // one value per request
}

type received struct {
	header http.Header
	body   []byte
}

func newReceiver(t *testing.T, statuses ...int) *receiver {
	t.Helper()
	r := &receiver{statuses: statuses, arrived: make(chan struct{}, 100)}
	r.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		body, _ := io.ReadAll(req.Body)
		r.mu.Lock()
		r.got = append(r.got, received{header: req.Header.Clone(), body: body})
		status := r.statuses[min(len(r.got), len(r.statuses))-1]
		r.mu.Unlock()
		w.WriteHeader(status)
		r.arrived <- struct{}{}
	}))
	t.Cleanup(r.srv.Close)
	return r
}

func (r *receiver) requests() []received {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]received(nil), r.got...)
}

func escalation() teamnotify.Notification {
	n, _ := teamnotify.Of("3f9a0c1b2d4e5f60", "/src/app", team.Event{Seq: 42, Kind: team.EventStoryPaused, Story: "US-002", Stage: 3,
		Role: "quality gate", At: time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC),
		Escalation: &pipeline.Escalation{Item: "US-002", Reason: pipeline.ReasonMergeConflict, Message: "calc.go conflicts"}})
	return n
}

// verifyIndependently checks a signature the way a receiver in another
// language would: HMAC-SHA256 of "<t>.<body>", hex, compared.
func verifyIndependently(t *testing.T, header string, body []byte) time.Time {
	t.Helper()
	var ts, sig string
	for _, part := range strings.Split(header, ",") {
		k, v, _ := strings.Cut(part, "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			sig = v
		}
	}
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts + "." + string(body)))
	assert.Equal(t, hex.EncodeToString(h.Sum(nil)), sig, "the HMAC of <t>.<body>")
	var unix int64
	require.NoError(t, json.Unmarshal([]byte(ts), &unix))
	return time.Unix(unix, 0)
}

func TestAWebhookPostsSignedJSON(t *testing.T) {
	r := newReceiver(t, http.StatusNoContent)
	clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 5, 0, time.UTC))
	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret, Clock: clk,
		Header: http.Header{"Authorization": {"Bearer receiver-token"}}})
	require.NoError(t, err)
	n := escalation()
	require.NoError(t, w.Notify(context.Background(), n))

	got := r.requests()
	require.Len(t, got, 1)
	h := got[0].header
	assert.Equal(t, "application/json", h.Get("Content-Type"))
	assert.Equal(t, "Bearer receiver-token", h.Get("Authorization"))
	assert.Equal(t, "escalation-42-3f9a0c1b2d4e5f60", h.Get(teamnotify.DeliveryHeader))
	signedAt := verifyIndependently(t, h.Get(teamnotify.SignatureHeader), got[0].body)
	assert.Equal(t, clk.Now().Unix(), signedAt.Unix(), "signed at the time of sending")
	require.NoError(t, teamnotify.VerifySignature(secret, h.Get(teamnotify.SignatureHeader), got[0].body, clk.Now(), 0))

	var back teamnotify.Notification
	require.NoError(t, json.Unmarshal(got[0].body, &back))
	assert.Equal(t, teamnotify.KindEscalation, back.Kind)
	assert.Equal(t, foreman.ItemID("US-002"), back.Story)
	assert.Equal(t, pipeline.ReasonMergeConflict, back.Escalation.Reason)
	assert.Equal(t, team.Actions(), back.Actions)
	assert.Equal(t, "/src/app", back.Repo)
	assert.Equal(t, "3f9a0c1b2d4e5f60", back.Team)
	assert.Equal(t, "escalation-42-3f9a0c1b2d4e5f60", back.ID)
}

func TestVerifySignatureRefusesForgeriesAndReplays(t *testing.T) {
	now := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	body := []byte(`{"id":"escalation-42"}`)
	good := teamnotify.Sign(secret, body, now)
	require.NoError(t, teamnotify.VerifySignature(secret, good, body, now.Add(time.Minute), 0))
	for name, c := range map[string]struct {
		header string
		body   []byte
		at     time.Time
		secret []byte
	}{
		"another body":         {good, []byte(`{"id":"escalation-43"}`), now, secret},
		"another secret":       {good, body, now, []byte("not-the-shared-secret-at-all")},
		"a replay, 6 min late": {good, body, now.Add(6 * time.Minute), secret},
		"from the future":      {good, body, now.Add(-6 * time.Minute), secret},
		"no timestamp":         {strings.SplitN(good, ",", 2)[1], body, now, secret},
		"garbage":              {"sha256=abc", body, now, secret},
		"a re-dated signature": {strings.Replace(good, fmt.Sprint(now.Unix()), fmt.Sprint(now.Add(time.Minute).Unix()), 1), body, now, secret},
	} {
		t.Run(name, func(t *testing.T) {
			err := teamnotify.VerifySignature(c.secret, c.header, c.body, c.at, 0)
			assert.ErrorIs(t, err, teamnotify.ErrBadSignature)
		})
	}
}

// A receiver that fails twice (500, 503) gets the notification on the
// third attempt, after waits that double with jitter; the clock is fake,
// so nothing sleeps.
func TestAWebhookRetriesAfterServerErrors(t *testing.T) {
	r := newReceiver(t, 500, 503, 200)
	clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret, Clock: clk,
		MinBackoff: 2 * time.Second, MaxBackoff: 30 * time.Second})
	require.NoError(t, err)
	done := make(chan error, 1)
	go func() { done <- w.Notify(context.Background(), escalation()) }()

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	for i, wait := range []time.Duration{2 * time.Second, 4 * time.Second} {
		require.NoError(t, clk.BlockUntil(ctx, 1), "retry %d waits on the clock", i+1)
		deadline, ok := clk.NextDeadline()
		require.True(t, ok)
		d := deadline.Sub(clk.Now())
		assert.True(t, d >= wait/2 && d <= wait, "wait %d is %s: between %s and %s", i+1, d, wait/2, wait)
		clk.Advance(d)
	}
	require.NoError(t, <-done)
	got := r.requests()
	require.Len(t, got, 3)
	for _, g := range got {
		assert.Equal(t, "escalation-42-3f9a0c1b2d4e5f60", g.header.Get(teamnotify.DeliveryHeader), "one ID on every attempt")
		require.NoError(t, teamnotify.VerifySignature(secret, g.header.Get(teamnotify.SignatureHeader), g.body, clk.Now(), 0))
	}
}

func TestAWebhookGivesUpWithATypedError(t *testing.T) {
	t.Run("after Attempts server errors", func(t *testing.T) {
		r := newReceiver(t, 500)
		clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
		w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret, Clock: clk, Attempts: 4})
		require.NoError(t, err)
		done := make(chan error, 1)
		go func() { done <- w.Notify(context.Background(), escalation()) }()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute) // a guard: CI under load once passed 30 s before the third retry waited
		defer cancel()
		for range 3 {
			require.NoError(t, clk.BlockUntil(ctx, 1))
			clk.Advance(teamnotify.DefaultMaxBackoff)
		}
		err = <-done
		require.ErrorIs(t, err, teamnotify.ErrDeliveryFailed)
		var de *teamnotify.DeliveryError
		require.True(t, errors.As(err, &de))
		assert.Equal(t, 4, de.Attempts)
		assert.Equal(t, 500, de.Status)
		assert.Len(t, r.requests(), 4)
		assert.Contains(t, err.Error(), "after 4 attempt(s): HTTP 500")
	})
	t.Run("at once on a 4xx a retry cannot change", func(t *testing.T) {
		r := newReceiver(t, http.StatusUnauthorized)
		w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret})
		require.NoError(t, err)
		err = w.Notify(context.Background(), escalation())
		var de *teamnotify.DeliveryError
		require.True(t, errors.As(err, &de))
		assert.Equal(t, 1, de.Attempts)
		assert.Equal(t, http.StatusUnauthorized, de.Status)
	})
	t.Run("nobody listening", func(t *testing.T) {
		r := newReceiver(t, 200)
		r.srv.Close()
		w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret, Attempts: 1})
		require.NoError(t, err)
		err = w.Notify(context.Background(), escalation())
		var de *teamnotify.DeliveryError
		require.True(t, errors.As(err, &de))
		assert.Equal(t, 0, de.Status)
		assert.Error(t, de.Err, "the transport's error")
	})
	t.Run("the context ends during a backoff", func(t *testing.T) {
		r := newReceiver(t, 500)
		clk := foreman.NewFakeClock(time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC))
		w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: r.srv.URL, Secret: secret, Clock: clk})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan error, 1)
		go func() { done <- w.Notify(ctx, escalation()) }()
		wait, stop := context.WithTimeout(context.Background(), 30*time.Second)
		defer stop()
		require.NoError(t, clk.BlockUntil(wait, 1))
		cancel()
		assert.ErrorIs(t, <-done, context.Canceled)
	})
}

func TestNewWebhookRefusesABadConfig(t *testing.T) {
	for name, cfg := range map[string]teamnotify.WebhookConfig{
		"no URL":        {Secret: secret},
		"not http":      {URL: "ftp://example.com/x", Secret: secret},
		"short secret":  {URL: "https://example.com/hook", Secret: []byte("short")},
		"negative":      {URL: "https://example.com/hook", Secret: secret, Attempts: -1},
		"max below min": {URL: "https://example.com/hook", Secret: secret, MinBackoff: time.Minute, MaxBackoff: time.Second},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := teamnotify.NewWebhook(cfg)
			assert.ErrorIs(t, err, teamnotify.ErrInvalidConfig)
		})
	}
}

// A redirect is not followed: the signed body would go to an address
// nobody configured (307 and 308 resend it). The 3xx fails the delivery
// at once, naming where it pointed; a client the host passes keeps its
// own redirect policy.
func TestAWebhookNeverFollowsARedirect(t *testing.T) {
	elsewhere := newReceiver(t, 200)
	for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusSeeOther,
		http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			var hits int
			var mu sync.Mutex
			redirector := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				mu.Lock()
				hits++
				mu.Unlock()
				http.Redirect(w, r, elsewhere.srv.URL+"/stolen", status)
			}))
			defer redirector.Close()
			followed := 0
			client := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { followed++; return nil }}
			w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: redirector.URL, Secret: secret, Client: client})
			require.NoError(t, err)
			err = w.Notify(context.Background(), escalation())
			require.ErrorIs(t, err, teamnotify.ErrDeliveryFailed)
			require.ErrorIs(t, err, teamnotify.ErrRedirected)
			var de *teamnotify.DeliveryError
			require.ErrorAs(t, err, &de)
			assert.Equal(t, status, de.Status)
			assert.Equal(t, 1, de.Attempts, "a redirect is not retried")
			assert.Contains(t, err.Error(), elsewhere.srv.URL+"/stolen", "names where it pointed")
			assert.Equal(t, 1, hits)
			assert.Zero(t, followed, "the host's CheckRedirect is not consulted")
			assert.NotNil(t, client.CheckRedirect, "the host's client is left as it was")
		})
	}
	assert.Empty(t, elsewhere.requests(), "nothing reached the redirect's target")
}
