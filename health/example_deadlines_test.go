package health_test

import (
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// A worker that heartbeats but makes no progress is caught by the progress
// deadline; one that falls silent, by the liveness deadline.
func ExampleDeadlines() {
	clk := foreman.NewFakeClock(time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC))
	d := health.NewDeadlines(health.DeadlineConfig{
		Clock: clk,
		OnExpiry: func(e health.Expiry) {
			fmt.Printf("%s: %s deadline passed at %s\n", e.Subject, e.Kind, e.Deadline.Format("15:04:05"))
		},
	})
	defer d.Close()

	_ = d.Add("busy-but-idle")
	_ = d.Add("silent")
	for i := 0; i < 100; i++ { // 1000 s of heartbeats, no progress
		clk.Advance(10 * time.Second)
		_ = d.Heartbeat("busy-but-idle")
	}
	// Output:
	// silent: liveness deadline passed at 12:00:45
	// busy-but-idle: progress deadline passed at 12:15:00
	// silent: progress deadline passed at 12:15:00
}
