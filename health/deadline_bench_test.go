package health

import (
	"fmt"
	"runtime"
	"slices"
	"strings"
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

// latenessReport sorts lates and reports p50, p99 and max in milliseconds.
func latenessReport(b *testing.B, lates []time.Duration) {
	if len(lates) == 0 {
		b.Fatal("no expiry observed")
	}
	slices.Sort(lates)
	pct := func(p float64) float64 {
		return float64(lates[int(p*float64(len(lates)-1))]) / float64(time.Millisecond)
	}
	b.ReportMetric(pct(0.50), "p50-late-ms")
	b.ReportMetric(pct(0.99), "p99-late-ms")
	b.ReportMetric(pct(1), "max-late-ms")
}

// BenchmarkExpiryLateness measures, on the real clock, how late expiries
// are reported: each round arms 200 deadlines spread over 20–50 ms and
// records how late each is noticed. The baseline arms one runtime timer per
// deadline (time.AfterFunc) in the same run, so that the figure for
// Deadlines can be read against what the machine's scheduler allows.
func BenchmarkExpiryLateness(b *testing.B) {
	const perRound = 200
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
		latenessReport(b, lates)
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
					lates = append(lates, time.Since(e.Deadline))
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
		latenessReport(b, lates)
	})
	// 100,000 subjects heartbeat from one goroutine while, each round, a
	// sample of 1,000 fresh subjects that never heartbeat expires over
	// 1.0–1.2 s. Lateness is time.Since(Deadline) read in OnExpiry, on the
	// real clock. "flat-out" beats as fast as the goroutine can (the worst
	// case for the lock the timer shares); "paced" beats each subject every
	// 0.5 s (200,000 beats/s, twenty times the load of the default 10 s
	// interval, and fast enough that no heartbeating subject's 1 s liveness
	// deadline passes: missed-expiries counts any that do).
	for _, tc := range []struct {
		name string
		rate int // beats per second; 0 means as fast as possible
	}{{"100k-heartbeating-flat-out", 0}, {"100k-heartbeating-paced", 2 * benchSubjects}} {
		b.Run(tc.name, func(b *testing.B) { benchLatenessUnderLoad(b, tc.rate) })
	}
}

func benchLatenessUnderLoad(b *testing.B, rate int) {
	const (
		sample  = 1000
		timeout = time.Second
		spread  = 200 * time.Millisecond
	)
	ids := benchIDs(benchSubjects)
	var (
		mu      sync.Mutex
		lates   []time.Duration
		pending int
		missed  int // heartbeating subjects that expired: the load is too much
		roundCh chan struct{}
		d       *Deadlines
	)
	d = NewDeadlines(DeadlineConfig{
		LivenessTimeout: timeout, Jitter: spread, ProgressTimeout: -1,
		OnExpiry: func(e Expiry) {
			late := time.Since(e.Deadline)
			mu.Lock()
			defer mu.Unlock()
			if !strings.HasPrefix(string(e.Subject), "sample-") {
				missed++
				return
			}
			lates = append(lates, late)
			d.Remove(e.Subject)
			if pending--; pending == 0 {
				close(roundCh)
			}
		},
	})
	defer d.Close()
	for _, id := range ids {
		if err := d.Add(id); err != nil {
			b.Fatal(err)
		}
	}
	stop := make(chan struct{})
	var beats atomic.Int64
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		var tick *time.Ticker
		batch := len(ids)
		if rate > 0 {
			tick = time.NewTicker(time.Millisecond)
			defer tick.Stop()
			batch = max(rate/1000, 1)
		}
		for i := 0; ; {
			if tick != nil {
				select {
				case <-stop:
					return
				case <-tick.C:
				}
			} else {
				select {
				case <-stop:
					return
				default:
				}
			}
			for range batch {
				_ = d.Heartbeat(ids[i%len(ids)])
				i++
			}
			beats.Add(int64(batch))
		}
	}()
	start := time.Now()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		mu.Lock()
		roundCh, pending = make(chan struct{}), sample
		done := roundCh
		mu.Unlock()
		for j := range sample {
			if err := d.Add(foreman.AssignmentID(fmt.Sprintf("sample-%d-%d", i, j))); err != nil {
				b.Fatal(err)
			}
		}
		<-done
	}
	b.StopTimer()
	close(stop)
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	latenessReport(b, lates)
	b.ReportMetric(float64(beats.Load())/time.Since(start).Seconds(), "beats/s")
	b.ReportMetric(float64(missed), "missed-expiries")
}
