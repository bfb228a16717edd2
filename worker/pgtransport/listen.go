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

	// mu guards paused and stopWait. While paused the connection listens
	// to nothing (UNLISTEN *), so that PostgreSQL does not signal it at
	// every notifying commit of the database (PostgreSQL 15 signals every
	// listening backend whatever its channels); when the pause ends it
	// LISTENs again and wakes every waiter, as after a reconnection.
	mu       sync.Mutex
	paused   bool
	stopWait context.CancelFunc // ends the wait under way, to act on a change
	changed  chan struct{}      // signalled when paused changes
}

func newListener(pool *pgxpool.Pool, channels []string, clk clock.Clock, retry time.Duration, log *slog.Logger) *listener {
	wake := make([]chan struct{}, len(channels))
	for i := range wake {
		wake[i] = make(chan struct{}, 1)
	}
	return &listener{pool: pool, channels: channels, wake: wake, clock: clk, retry: retry, log: log, ready: make(chan struct{}),
		changed: make(chan struct{}, 1)}
}

// setPaused pauses or resumes listening; the connection acts on it at
// once (one UNLISTEN or LISTEN round trip), and resuming wakes every
// waiter (notifications sent during the pause were missed).
func (l *listener) setPaused(p bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.paused == p {
		return
	}
	l.paused = p
	if l.stopWait != nil {
		l.stopWait()
	}
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

// isPaused says whether listening is paused.
func (l *listener) isPaused() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paused
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
	listening := false
	for {
		if want := !l.isPaused(); want != listening {
			if !want {
				if _, err := conn.Exec(ctx, "UNLISTEN *"); err != nil {
					return err
				}
				listening = false
				continue
			}
			for _, ch := range l.channels {
				if _, err := conn.Exec(ctx, "LISTEN "+pgx.Identifier{ch}.Sanitize()); err != nil {
					return err
				}
			}
			listening = true
			l.readyOnce.Do(func() { close(l.ready) })
			if l.onNotify != nil {
				l.onNotify("", "")
			}
			l.signal("") // anything sent before LISTEN took effect
			continue
		}
		if !listening {
			select {
			case <-ctx.Done():
				return ctx.Err()
			case <-l.changed:
			}
			continue
		}
		// Wait for a notification until one comes, ctx ends or the pause
		// changes (a wait ended by its deadline leaves the connection
		// usable).
		wctx, cancel := context.WithCancel(ctx)
		l.mu.Lock()
		l.stopWait = cancel
		stale := l.paused
		l.mu.Unlock()
		if stale {
			cancel()
		}
		n, err := conn.WaitForNotification(wctx)
		l.mu.Lock()
		l.stopWait = nil
		l.mu.Unlock()
		cancel()
		if err != nil {
			if ctx.Err() == nil && wctx.Err() != nil && !conn.IsClosed() {
				continue // paused meanwhile
			}
			return err
		}
		if l.onNotify != nil {
			l.onNotify(n.Channel, n.Payload)
		}
		l.signal(n.Channel)
	}
}
