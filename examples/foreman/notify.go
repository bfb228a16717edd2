package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teamnotify"
)

// envNotifySecret holds the webhook's signing secret: a secret on the
// command line would show in ps.
const envNotifySecret = "FOREMAN_NOTIFY_SECRET"

// notify sends this run's escalations and its end to the -notify
// webhook, from a goroutine of its own (the team never waits for it). The
// returned function gives the last notifications a moment to go out, then
// stops it.
func notify(tm *team.Team, o options, stderr io.Writer) (stop func(), err error) {
	secret := os.Getenv(envNotifySecret)
	if secret == "" {
		return nil, fmt.Errorf("-notify needs the signing secret in $%s (at least %d characters)", envNotifySecret, teamnotify.MinSecretLen)
	}
	w, err := teamnotify.NewWebhook(teamnotify.WebhookConfig{URL: o.notify, Secret: []byte(secret)})
	if err != nil {
		return nil, fmt.Errorf("-notify: %w", err)
	}
	var after uint64
	if evs := tm.Events(0); len(evs) > 0 {
		after = evs[len(evs)-1].Seq // this run's news, not earlier runs'
	}
	ctx, cancel := context.WithCancel(context.Background())
	var once sync.Once
	finished := make(chan struct{}) // the run's end was handled
	done := make(chan struct{})
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: slog.LevelWarn}))
	go func() {
		defer close(done)
		_ = teamnotify.Forward(ctx, tm, teamnotify.ForwardConfig{Notifier: w, After: after, Logger: log,
			OnDone: func(n teamnotify.Notification, _ error) {
				if n.Kind == teamnotify.KindRunFinished {
					once.Do(func() { close(finished) })
				}
			}})
	}()
	return func() {
		// A run that ended recorded its end: wait until that went out
		// (retried for a while if the receiver is down; Ctrl-C cuts it
		// short). A run that never started has nothing more to send.
		if ranToItsEnd(tm, after) {
			select {
			case <-finished:
			case <-done:
			}
		}
		cancel()
		<-done
	}, nil
}

func ranToItsEnd(tm *team.Team, after uint64) bool {
	for _, e := range tm.Events(after) {
		if e.Kind == team.EventRunFinished {
			return true
		}
	}
	return false
}
