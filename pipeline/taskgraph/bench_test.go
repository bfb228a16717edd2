package taskgraph

import (
	"runtime"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user+system CPU time: on a machine shared with
// other work, CPU time per transition (GC included) is steadier than the
// wall clock.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mallocs is the process's count of heap allocations so far.
func mallocs() uint64 {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.Mallocs
}

// BenchmarkCoreTransitions measures the pure core in memory. One op is one
// core transition (one Handle or Update call). Sub-benchmarks:
//
//   - table: one NextStatus lookup, the baseline the others are compared
//     against in the same run;
//   - check: the read-only report (builds the StatusReport, no text);
//   - pipeline: a whole full-lifecycle-fe session (18 tasks) driven to
//     PIPELINE_COMPLETE through spawn-next, a resume at the checkpoint
//     and fenced completion callbacks that each spawn what became ready;
//     the runtime's draining of pending effects is simulated by dropping
//     them between steps; Handle leaves every input session untouched
//     (copy on write);
//   - pipeline-inplace: the same through Apply, which changes the session
//     in place (for a loop that owns its session).
//
// Each reports transitions/s, transitions/cpu-s and its ratio to the
// baseline; pipeline and pipeline-inplace also report allocs/transition,
// an allocation regression guard (Handle: about 6, Apply: about 3).
func BenchmarkCoreTransitions(b *testing.B) {
	var tableNs float64
	b.Run("table", func(b *testing.B) {
		var s Status
		for i := 0; b.Loop(); i++ {
			s, _ = NextStatus("T", Status(i&1), EventCancel)
		}
		_ = s
		tableNs = float64(b.Elapsed().Nanoseconds()) / float64(b.N)
		b.ReportMetric(1e9/tableNs, "transitions/s")
	})
	report := func(b *testing.B, transitions int, cpu0 time.Duration, mallocs0 uint64) {
		ns := float64(b.Elapsed().Nanoseconds()) / float64(transitions)
		b.ReportMetric(1e9/ns, "transitions/s")
		b.ReportMetric(float64(transitions)/(cpuTime(b)-cpu0).Seconds(), "transitions/cpu-s")
		if mallocs0 > 0 {
			b.ReportMetric(float64(mallocs()-mallocs0)/float64(transitions), "allocs/transition")
		}
		if tableNs > 0 {
			b.ReportMetric(ns/tableNs, "x-table")
		}
	}

	c := NewCore(CoreConfig{})
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	fresh, err := c.NewSession("bench", ModeFullLifecycleFE, nil, at)
	if err != nil {
		b.Fatal(err)
	}

	b.Run("check", func(b *testing.B) {
		s, _, _ := c.Handle(fresh, WakeUp{At: at})
		b.ReportAllocs()
		cpu0 := cpuTime(b)
		for b.Loop() {
			_ = c.Status(s, at)
		}
		report(b, b.N, cpu0, 0)
	})

	b.Run("pipeline-inplace", func(b *testing.B) {
		b.ReportAllocs()
		transitions := 0
		cpu0, mallocs0 := cpuTime(b), mallocs()
		for b.Loop() {
			s := fresh.clone() // a fresh session per pipeline, counted
			s.Graph = s.Graph.clone()
			res, err := c.Apply(s, WakeUp{At: at})
			transitions++
			for err == nil && s.Status != SessionCompleted {
				s.Pending = s.Pending[:0] // the runtime drains these
				if s.Status == SessionPaused {
					res, err = c.Apply(s, WakeUp{Handler: HandleResume, At: at})
					transitions++
					continue
				}
				w := s.ActiveWorkers[0]
				res, err = c.Apply(s, WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: OutcomeCompleted, At: at})
				transitions++
			}
			if err != nil || res.Outcome != StepComplete {
				b.Fatalf("pipeline did not complete: %v %v", err, res.Outcome)
			}
		}
		report(b, transitions, cpu0, mallocs0)
	})

	b.Run("pipeline", func(b *testing.B) {
		b.ReportAllocs()
		transitions := 0
		cpu0, mallocs0 := cpuTime(b), mallocs()
		for b.Loop() {
			s, res, err := c.Handle(fresh, WakeUp{At: at})
			transitions++
			for err == nil && s.Status != SessionCompleted {
				s.Pending = nil // the runtime drains these
				if s.Status == SessionPaused {
					s, res, err = c.Handle(s, WakeUp{Handler: HandleResume, At: at})
					transitions++
					continue
				}
				w := s.ActiveWorkers[0]
				s, res, err = c.Handle(s, WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: OutcomeCompleted, At: at})
				transitions++
			}
			if err != nil || res.Outcome != StepComplete {
				b.Fatalf("pipeline did not complete: %v %v", err, res.Outcome)
			}
		}
		report(b, transitions, cpu0, mallocs0)
	})
}
