// Package clock abstracts time so that every timeout in Foreman can be
// driven by a fake clock in tests. Code never calls time.Now or time.After
// directly; it takes a Clock.//
// Real is the wall clock. Fake is advanced by hand: its timers fire only
// inside Advance or Set, in deadline order, so tests never sleep. The root
// package re-exports both as foreman.Clock and foreman.FakeClock.
package clock
