package foreman_test

import (
	"context"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
)

// A test drives timeouts with a FakeClock instead of sleeping.
func ExampleFakeClock() {
	clk := foreman.NewFakeClock(time.Date(2026, 1, 1, 9, 0, 0, 0, time.UTC))
	done := make(chan string, 1)
	go func() {
		t := clk.NewTimer(45 * time.Second)
		at := <-t.C() // the time the timer fell due, not when we woke up
		done <- "liveness expired at " + at.Format("15:04:05")
	}()
	_ = clk.BlockUntil(context.Background(), 1) // the goroutine is waiting
	clk.Advance(time.Minute)
	fmt.Println(<-done)
	// Output: liveness expired at 09:00:45
}
