package pipeline

import (
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time. On a machine shared with
// other work the wall clock measures the contention as much as the code;
// CPU time per op (GC included) does not.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkCoreTransitions runs whole stories through the pure core: start,
// four reports, merge result: six transitions per story. ns/op is per
// transition; transitions/s is reported.
func BenchmarkCoreTransitions(b *testing.B) {
	f := StoryFlow(StoryConfig{})
	start := State{Item: item}
	outcomes := [...]Outcome{Complete, Go, Complete, Pass}
	boards := [...]*BoardStory{boardOK(0), boardOK(1), boardOK(2), nil}
	now := t0
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	n := 0
	for n < b.N {
		s, _, err := f.Step(start, Event{Kind: EventStart}, now)
		if err != nil {
			b.Fatal(err)
		}
		n++
		for i := 0; i < 4 && n < b.N; i++ {
			s, _, err = f.Step(s, Event{Kind: EventReport, Worker: s.Worker, Assignment: s.Assignment,
				Stage: i, Outcome: outcomes[i], Score: "9", Tasks: 3, Board: boards[i]}, now)
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n < b.N {
			if _, _, err = f.Step(s, Event{Kind: EventMerged}, now); err != nil {
				b.Fatal(err)
			}
			n++
		}
		now = now.Add(time.Second)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "transitions/cpu-s")
}

// BenchmarkCoreGuards measures the guards alone: a stale message and a
// duplicate report, the cheapest paths through Step.
func BenchmarkCoreGuards(b *testing.B) {
	f := StoryFlow(StoryConfig{})
	s, _, _ := f.Step(State{Item: item}, Event{Kind: EventStart}, t0)
	stale := Event{Kind: EventReport, Worker: "someone", Assignment: "x", Stage: 0, Outcome: Complete}
	b.ReportAllocs()
	cpu0 := cpuTime(b)
	for b.Loop() {
		if _, _, err := f.Step(s, stale, t0); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "transitions/s")
	b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "transitions/cpu-s")
}
