package foreman

import (
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// Clock is the source of time for every deadline in Foreman. Config fields
// of this type default to the wall clock when nil. Its methods:
//
//	Now() time.Time
//	Since(t time.Time) time.Duration
//	NewTimer(d time.Duration) Timer             // fires once on Timer.C()
//	AfterFunc(d time.Duration, f func()) Timer  // calls f once; C() is nil
//	NewTicker(d time.Duration) Ticker           // slow receivers drop ticks
//
// Implement it to drive Foreman from your own time source; use RealClock or
// NewFakeClock otherwise.
type Clock = clock.Clock

// Timer is a single-shot timer from a Clock:
//
//	C() <-chan time.Time
//	Stop() bool                // reports whether the timer was armed
//	Reset(d time.Duration) bool
type Timer = clock.Timer

// Ticker is a repeating timer from a Clock:
//
//	C() <-chan time.Time
//	Stop()
//	Reset(d time.Duration)
type Ticker = clock.Ticker

// FakeClock is a manually advanced Clock for tests: timers fire only inside
// Advance or Set, in deadline order (ties in creation order), so tests never
// sleep. AfterFunc callbacks run synchronously on the goroutine calling
// Advance, without the clock's lock held. Its methods beyond Clock's:
//
//	Advance(d time.Duration)                    // move forward, firing due timers
//	Set(t time.Time)                            // move to t (never backwards)
//	Pending() int                               // armed timers and tickers
//	BlockUntil(ctx context.Context, n int) error // wait until n timers are armed
//	NextDeadline() (time.Time, bool)            // when the earliest timer fires
//
// BlockUntil lets a test advance the clock only once the code under test is
// waiting on it.
type FakeClock = clock.Fake

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return clock.NewFake(start) }

// RealClock returns the wall clock.
func RealClock() Clock { return clock.Real() }
