package health

import (
	"fmt"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
)

const benchSubjects = 100_000

func benchIDs(n int) []foreman.AssignmentID {
	ids := make([]foreman.AssignmentID, n)
	for i := range ids {
		ids[i] = foreman.AssignmentID(fmt.Sprintf("assignment-%06d", i))
	}
	return ids
}

// naiveLastSeen is the baseline: a typical dispatcher keeps a
// last-seen time per worker in a map and scans it on a ticker. Its beat is
// the cheapest possible; its cost is the scan, which Deadlines never does.
type naiveLastSeen struct {
	mu   sync.Mutex
	seen map[foreman.AssignmentID]time.Time
}

func (n *naiveLastSeen) beat(id foreman.AssignmentID) {
	now := time.Now()
	n.mu.Lock()
	n.seen[id] = now
	n.mu.Unlock()
}

// heartbeater is what BenchmarkHeartbeat drives: Deadlines or the baseline.
type heartbeater interface {
	beat(id foreman.AssignmentID) error
}

type deadlinesBeat struct{ *Deadlines }

func (d deadlinesBeat) beat(id foreman.AssignmentID) error { return d.Heartbeat(id) }

type deadlinesProgress struct{ *Deadlines }

func (d deadlinesProgress) beat(id foreman.AssignmentID) error { return d.Progress(id) }

func (n *naiveLastSeen) beatErr(id foreman.AssignmentID) error { n.beat(id); return nil }

type naiveBeat struct{ *naiveLastSeen }

func (n naiveBeat) beat(id foreman.AssignmentID) error { return n.beatErr(id) }

// BenchmarkHeartbeat measures one heartbeat among 100,000 tracked subjects
// on the real clock, against the naive map baseline in the same run. Every
// case first beats each subject once, untimed (warm-up: map buckets, heap
// entries and caches are in the state a long-running tracker sees), and
// collects garbage, so that the figure does not depend on what ran before.
// The -parallel cases beat from GOMAXPROCS goroutines at once.
func BenchmarkHeartbeat(b *testing.B) {
	ids := benchIDs(benchSubjects)
	for _, tc := range []struct {
		name string
		make func(b *testing.B) heartbeater
	}{
		{"baseline-map", func(*testing.B) heartbeater {
			return naiveBeat{&naiveLastSeen{seen: make(map[foreman.AssignmentID]time.Time, len(ids))}}
		}},
		{"deadlines", func(b *testing.B) heartbeater { return deadlinesBeat{benchDeadlines(b, DeadlineConfig{}, ids)} }},
		{"deadlines-jitter", func(b *testing.B) heartbeater {
			return deadlinesBeat{benchDeadlines(b, DeadlineConfig{Jitter: time.Second}, ids)}
		}},
		{"deadlines-progress", func(b *testing.B) heartbeater {
			return deadlinesProgress{benchDeadlines(b, DeadlineConfig{}, ids)}
		}},
	} {
		warm := func(b *testing.B) heartbeater {
			h := tc.make(b)
			for _, id := range ids {
				if err := h.beat(id); err != nil {
					b.Fatal(err)
				}
			}
			runtime.GC()
			return h
		}
		b.Run(tc.name, func(b *testing.B) {
			h := warm(b)
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := h.beat(ids[i%len(ids)]); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "beats/s")
		})
		b.Run(tc.name+"-parallel", func(b *testing.B) {
			h := warm(b)
			var next atomic.Int64
			b.ReportAllocs()
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				// Each goroutine walks the ids from its own starting point.
				i := int(next.Add(int64(len(ids)) / 16))
				for pb.Next() {
					if err := h.beat(ids[i%len(ids)]); err != nil {
						b.Error(err)
						return
					}
					i++
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "beats/s")
		})
	}
}

// benchDeadlines returns a tracker with ids added, closed when b ends.
func benchDeadlines(b *testing.B, cfg DeadlineConfig, ids []foreman.AssignmentID) *Deadlines {
	d := NewDeadlines(cfg)
	b.Cleanup(func() { _ = d.Close() })
	for _, id := range ids {
		if err := d.Add(id); err != nil {
			b.Fatal(err)
		}
	}
	return d
}

// BenchmarkMemoryPerSubject reports the heap bytes one tracked subject
// costs, measured over 100,000 subjects (ids excluded: the caller owns them).
func BenchmarkMemoryPerSubject(b *testing.B) {
	ids := benchIDs(benchSubjects)
	var perSubject float64
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		// A fake clock, so that no runtime timer keeps an earlier tracker
		// alive across the measurement.
		d := NewDeadlines(DeadlineConfig{AttemptTimeout: time.Hour, Clock: foreman.NewFakeClock(time.Time{})})
		for _, id := range ids {
			_ = d.Add(id)
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perSubject = float64(after.HeapAlloc-before.HeapAlloc) / float64(len(ids))
		runtime.KeepAlive(d)
		_ = d.Close()
	}
	b.ReportMetric(perSubject, "B/subject")
}

// BenchmarkExpiryLateness measures, on the real clock, how late expiries
// are reported: each round arms 200 deadlines spread over 20–50 ms and
// records how late each is noticed. The baseline arms one runtime timer per
// deadline (time.AfterFunc) in the same run, so that the figure for
// Deadlines can be read against what the machine's scheduler allows.
func BenchmarkExpiryLateness(b *testing.B) {
	const perRound = 200
	report := func(b *testing.B, lates []time.Duration) {
		slices.Sort(lates)
		pct := func(p float64) float64 {
			return float64(lates[int(p*float64(len(lates)-1))]) / float64(time.Millisecond)
		}
		b.ReportMetric(pct(0.50), "p50-late-ms")
		b.ReportMetric(pct(0.99), "p99-late-ms")
		b.ReportMetric(pct(1), "max-late-ms")
	}
	b.Run("baseline-afterfunc", func(b *testing.B) {
		var lates []time.Duration
		for i := 0; i < b.N; i++ {
			var mu sync.Mutex
			var wg sync.WaitGroup
			wg.Add(perRound)
			for j := 0; j < perRound; j++ {
				wait := 20*time.Millisecond + time.Duration(j)*30*time.Millisecond/perRound
				due := time.Now().Add(wait)
				time.AfterFunc(wait, func() {
					late := time.Since(due)
					mu.Lock()
					lates = append(lates, late)
					mu.Unlock()
					wg.Done()
				})
			}
			wg.Wait()
		}
		report(b, lates)
	})
	b.Run("deadlines", func(b *testing.B) {
		var lates []time.Duration
		for i := 0; i < b.N; i++ {
			done := make(chan struct{})
			var mu sync.Mutex
			count := 0
			d := NewDeadlines(DeadlineConfig{
				LivenessTimeout: 20 * time.Millisecond, Jitter: 30 * time.Millisecond, ProgressTimeout: -1,
				OnExpiry: func(e Expiry) {
					mu.Lock()
					defer mu.Unlock()
					lates = append(lates, e.Late)
					if count++; count == perRound {
						close(done)
					}
				},
			})
			for j := 0; j < perRound; j++ {
				_ = d.Add(foreman.AssignmentID(fmt.Sprintf("r%d-s%d", i, j)))
			}
			<-done
			_ = d.Close()
		}
		report(b, lates)
	})
}
