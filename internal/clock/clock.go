package clock

import (
	"context"
	"time"
)

// Clock is the source of time and timers.
type Clock interface {
	Now() time.Time
	Since(t time.Time) time.Duration
	// NewTimer returns a timer that delivers the time on C once d elapses.
	NewTimer(d time.Duration) Timer
	// AfterFunc calls f in its own goroutine (real clock) or synchronously
	// inside Advance (fake clock) once d elapses. C of the returned Timer is nil.
	AfterFunc(d time.Duration, f func()) Timer
	// NewTicker delivers the time on C every d; slow receivers drop ticks.
	NewTicker(d time.Duration) Ticker
}

// Timer is a single-shot timer.
type Timer interface {
	C() <-chan time.Time
	// Stop prevents the timer from firing; it reports whether it was armed.
	Stop() bool
	// Reset re-arms the timer to fire after d; it reports whether it was armed.
	Reset(d time.Duration) bool
}

// Ticker fires repeatedly.
type Ticker interface {
	C() <-chan time.Time
	Stop()
	Reset(d time.Duration)
}

// Real returns the wall clock.
func Real() Clock { return realClock{} }

// OrReal returns c, or the wall clock when c is nil. Config structs use it so
// that their zero value means the real clock.
func OrReal(c Clock) Clock {
	if c == nil {
		return realClock{}
	}
	return c
}

// Sleep waits for d on c, returning early with ctx's error if ctx ends first.
func Sleep(ctx context.Context, c Clock, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := c.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C():
		return nil
	}
}

type realClock struct{}

func (realClock) Now() time.Time                  { return time.Now() }
func (realClock) Since(t time.Time) time.Duration { return time.Since(t) }
func (realClock) NewTimer(d time.Duration) Timer  { return realTimer{time.NewTimer(d)} }
func (realClock) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}
func (realClock) NewTicker(d time.Duration) Ticker { return realTicker{time.NewTicker(d)} }

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

type realTicker struct{ t *time.Ticker }

func (r realTicker) C() <-chan time.Time   { return r.t.C }
func (r realTicker) Stop()                 { r.t.Stop() }
func (r realTicker) Reset(d time.Duration) { r.t.Reset(d) }
