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

// benchScores are valid scores of each StoryFlow stage's report (plan
// 0..4, readiness 0..10, none, quality 0..100).
var benchScores = [...]string{"4", "9", "", "92"}

// BenchmarkCoreTransitions measures the pure core in memory; one op is one
// transition (one Step or AppendStep call), so ns/op and allocs/op are per
// transition.
// Sub-benchmarks:
//
//   - table: one lookup in the status × event table, the baseline the
//     others are compared against in the same run (x-table);
//   - story: whole stories: start, four reports, merge result: six
//     transitions per story, every input state left untouched;
//   - story-append: the same stories through AppendStep, one effects
//     buffer reused by every transition (a host that carries out each
//     transition's effects before the next);
//   - guards: a stale report, the cheapest path through Step.
//
// Each reports transitions/s (wall clock) and transitions/cpu-s. The
// B/op and allocs/op of story, story-append and guards are allocation
// regression guards.
// story: 720 B/op, reported as 1 allocs/op (11 allocations per six-step
// story, 1.83 per transition). Each transition but the merge result
// allocates its effects together with the stage records it changes (a
// 640 B size class for the start's 2 effects, 768 B for a report's 3) and
// its generated texts (result line, worker name, assignment id) as one
// string of their exact size (16-48 B); the merge result allocates its 3
// effects (448 B). That is the new state and effects themselves, near the
// floor for these types; beyond Step's own work the story figure is mostly
// the garbage collector, which runs every ~4 MB in this nearly empty heap.
// story-append: 266 B/op, reported as 1 allocs/op (10 allocations, 1600 B
// per story): the effects cost nothing; what is left is a copy of the 4
// stage records (288 B) for each transition but the merge result, which
// changes none, and the texts (16-48 B). The new state keeps the records,
// so they cannot live in a buffer the caller reuses.
// guards: none.
//
// On a loaded 2-core machine (load average 6-7), -count 5: story 1253-1534
// ns/op, 0.65-0.80M transitions/s, 0.66-0.83M transitions/cpu-s (median
// 0.77M); story-append 1011-1322 ns/op, 0.76-0.99M transitions/s,
// 0.93-1.05M transitions/cpu-s (median 0.99M), 1.29x story's median. With
// GOGC=2000 story-append does about 1.5M transitions/cpu-s: the garbage
// collector is still about a third of its figure.
func BenchmarkCoreTransitions(b *testing.B) {
	var tableNs float64
	report := func(b *testing.B, cpu0 time.Duration) {
		ns := float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(1e9/ns, "transitions/s")
		b.ReportMetric(float64(b.N)/(cpuTime(b)-cpu0).Seconds(), "transitions/cpu-s")
		if tableNs > 0 {
			b.ReportMetric(ns/tableNs, "x-table")
		}
	}

	b.Run("table", func(b *testing.B) {
		var h handler
		for i := 0; b.Loop(); i++ {
			h |= table[Status(i)%numStatuses][EventKind(i)%numEventKinds]
		}
		_ = h
		tableNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(1e9/tableNs, "transitions/s")
	})

	f := StoryFlow(StoryConfig{})
	b.Run("story", func(b *testing.B) {
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
					Stage: i, Outcome: outcomes[i], Score: benchScores[i], Tasks: 3, Board: boards[i]}, now)
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
		report(b, cpu0)
	})

	b.Run("story-append", func(b *testing.B) {
		start := State{Item: item}
		outcomes := [...]Outcome{Complete, Go, Complete, Pass}
		boards := [...]*BoardStory{boardOK(0), boardOK(1), boardOK(2), nil}
		now := t0
		buf := make([]Effect, 0, 8)
		b.ReportAllocs()
		b.ResetTimer()
		cpu0 := cpuTime(b)
		n := 0
		for n < b.N {
			s, effs, err := f.AppendStep(buf[:0], start, Event{Kind: EventStart}, now)
			if err != nil {
				b.Fatal(err)
			}
			n++
			for i := 0; i < 4 && n < b.N; i++ {
				s, effs, err = f.AppendStep(effs[:0], s, Event{Kind: EventReport, Worker: s.Worker, Assignment: s.Assignment,
					Stage: i, Outcome: outcomes[i], Score: benchScores[i], Tasks: 3, Board: boards[i]}, now)
				if err != nil {
					b.Fatal(err)
				}
				n++
			}
			if n < b.N {
				if _, effs, err = f.AppendStep(effs[:0], s, Event{Kind: EventMerged}, now); err != nil {
					b.Fatal(err)
				}
				n++
			}
			buf = effs
			now = now.Add(time.Second)
		}
		b.StopTimer()
		report(b, cpu0)
	})

	b.Run("guards", func(b *testing.B) {
		s, _, _ := f.Step(State{Item: item}, Event{Kind: EventStart}, t0)
		stale := Event{Kind: EventReport, Worker: "someone", Assignment: "x", Stage: 0, Outcome: Complete}
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			if _, _, err := f.Step(s, stale, t0); err != nil {
				b.Fatal(err)
			}
		}
		report(b, cpu0)
	})
}
