package pgtransport

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/internal/clock"
)

// listener keeps one connection of its own LISTENing on its channels and
// turns every notification into a wake-up. It is only a shortcut: the
// loops it wakes also poll, so a lost connection or a lost notification
// delays work by at most one poll interval, and the listener reconnects
// after that long.
type listener struct {
	pool     *pgxpool.Pool
	channels []string
	wake     []chan struct{} // wake[i] is signalled for channels[i]
	clock    clock.Clock
	retry    time.Duration
	log      *slog.Logger

	// onNotify, when set, sees each notification's channel and payload
	// before its waiters wake, and ("", "") whenever notifications may
	// have been missed (the first LISTEN and every reconnection).
	onNotify func(channel, payload string)

	readyOnce sync.Once
	ready     chan struct{} // closed once LISTEN first took effect
}

func newListener(pool *pgxpool.Pool, channels []string, clk clock.Clock, retry time.Duration, log *slog.Logger) *listener {
	wake := make([]chan struct{}, len(channels))
	for i := range wake {
		wake[i] = make(chan struct{}, 1)
	}
	return &listener{pool: pool, channels: channels, wake: wake, clock: clk, retry: retry, log: log, ready: make(chan struct{})}
}

// signal wakes the waiters of channel ch, or of every channel if ch is "".
func (l *listener) signal(ch string) {
	for i, c := range l.channels {
		if ch != "" && c != ch {
			continue
		}
		select {
		case l.wake[i] <- struct{}{}:
		default:
		}
	}
}

// run listens until ctx ends.
func (l *listener) run(ctx context.Context) {
	for ctx.Err() == nil {
		err := l.session(ctx)
		if ctx.Err() != nil {
			return
		}
		l.log.Warn("pgtransport: LISTEN connection lost, polling until it is back", "channels", l.channels, "err", err)
		if clock.Sleep(ctx, l.clock, l.retry) != nil {
			return
		}
	}
}

func (l *listener) session(ctx context.Context) error {
	conn, err := pgx.ConnectConfig(ctx, l.pool.Config().ConnConfig.Copy())
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	for _, ch := range l.channels {
		if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
			return err
		}
	}
	l.readyOnce.Do(func() { close(l.ready) })
	if l.onNotify != nil {
		l.onNotify("", "")
	}
	l.signal("") // anything sent before LISTEN took effect
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		if l.onNotify != nil {
			l.onNotify(n.Channel, n.Payload)
		}
		l.signal(n.Channel)
	}
}
