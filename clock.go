package foreman

import (
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// Clock is the source of time for every deadline in Foreman. Config fields
// of this type default to the wall clock when nil.
type Clock = clock.Clock

// Timer and Ticker are the timers a Clock hands out.
type (
	Timer  = clock.Timer
	Ticker = clock.Ticker
)

// FakeClock is a manually advanced Clock for tests: timers fire only inside
// Advance, in deadline order, so tests never sleep.
type FakeClock = clock.Fake

// NewFakeClock returns a FakeClock reading start.
func NewFakeClock(start time.Time) *FakeClock { return clock.NewFake(start) }

// RealClock returns the wall clock.
func RealClock() Clock { return clock.Real() }
