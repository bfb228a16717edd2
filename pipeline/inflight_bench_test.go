package pipeline_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
)

// BenchmarkStoriesInFlight is durable throughput against its limit: whole
// four-stage stories through the Runtime with services that do nothing, 1, 8
// and 64 of them in flight (each in-flight slot runs its stories one after
// another), on the Memory store and on SQLite (synchronous=FULL), in one
// run together with the disk's own fsync rate (ceiling/fsync), the ceiling
// for anything that commits alone. Run it with a fixed story count:
//
//	go test -run '^$' -bench StoriesInFlight -benchtime 2000x ./pipeline/
//
// Metrics: stories/s, writes/s (store Applies), commits/s (for SQLite the
// transactions, one WAL fsync each; Memory has none, so its commits/s is
// its writes/s), writes/commit (how many writes share an fsync),
// p50-ms/p99-ms (a story's latency from Start to DONE), x-memory (SQLite's
// stories/s over Memory's at the same concurrency, this run) and
// peak-RSS-MB (the process's peak resident memory during the
// sub-benchmark, read from /proc on Linux).
func BenchmarkStoriesInFlight(b *testing.B) {
	b.Run("ceiling/fsync", benchmarkFsync)
	memoryRate := map[int]float64{}
	for _, kind := range []string{"memory", "sqlite"} {
		for _, inFlight := range []int{1, 8, 64} {
			b.Run(fmt.Sprintf("store=%s/in-flight=%d", kind, inFlight), func(b *testing.B) {
				rate := benchmarkStories(b, kind, inFlight)
				if kind == "memory" {
					memoryRate[inFlight] = rate
				} else if m := memoryRate[inFlight]; m > 0 {
					b.ReportMetric(rate/m, "x-memory")
				}
			})
		}
	}
}

// benchmarkFsync appends a line to a file and fsyncs it, b.N times, next
// to where the stores keep their files.
func benchmarkFsync(b *testing.B) {
	f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	line := []byte(`{"item":"S-42","stage":2}` + "\n")
	for b.Loop() {
		if _, err := f.Write(line); err != nil {
			b.Fatal(err)
		}
		if err := f.Sync(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
}

// benchmarkStories runs b.N stories, inFlight at a time, and returns
// stories/s.
func benchmarkStories(b *testing.B, kind string, inFlight int) float64 {
	st := openStore(b, kind)
	sq, _ := st.(*sqlitestore.Store)
	world := newStoryWorld()
	rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: st, Spawner: world, Messenger: world,
		Worktrees: world, Merger: world, Board: world, Escalator: world, Reporter: world})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	latencies := make([]time.Duration, b.N)
	var next atomic.Int64
	var failed atomic.Value
	var commitsBefore int64
	if sq != nil {
		commitsBefore = sq.WriteStats().Commits
	}
	resetPeakRSS()
	b.ResetTimer()
	var wg sync.WaitGroup
	for range inFlight {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= b.N || failed.Load() != nil {
					return
				}
				began := time.Now()
				if err := runStory(ctx, rt, foreman.ItemID("S-"+strconv.Itoa(i))); err != nil {
					failed.Store(err)
					return
				}
				latencies[i] = time.Since(began)
			}
		})
	}
	wg.Wait()
	b.StopTimer()
	if err := failed.Load(); err != nil {
		b.Fatal(err)
	}
	secs := b.Elapsed().Seconds()
	writes := float64(rt.Stats().Transitions)
	commits := writes
	if sq != nil {
		commits = float64(sq.WriteStats().Commits - commitsBefore)
	}
	slices.Sort(latencies)
	rate := float64(b.N) / secs
	b.ReportMetric(rate, "stories/s")
	b.ReportMetric(writes/secs, "writes/s")
	b.ReportMetric(commits/secs, "commits/s")
	b.ReportMetric(writes/commits, "writes/commit")
	b.ReportMetric(ms(latencies[len(latencies)/2]), "p50-ms")
	b.ReportMetric(ms(latencies[len(latencies)*99/100]), "p99-ms")
	if mb := peakRSSMB(); mb > 0 {
		b.ReportMetric(mb, "peak-RSS-MB")
	}
	return rate
}

// storyLines are the workers' reports, stage by stage.
var storyLines = [...]string{
	"Stage 0 COMPLETE for %s. 2 tasks created. Plan score: 4/4.",
	"Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 8.",
	"Stage 2 COMPLETE for %s. All tasks Done. Story set to To Review.",
	"Stage 3 COMPLETE for %s. Verdict: PASS. Quality Score: 92/100.",
}

// runStory starts a story and delivers its four reports, each from the
// worker the runtime spawned for the stage.
func runStory(ctx context.Context, rt *pipeline.Runtime, id foreman.ItemID) error {
	st, err := rt.Start(ctx, id, "")
	if err != nil {
		return err
	}
	for _, line := range storyLines {
		env, err := message.Open(st.Worker, st.Assignment, fmt.Sprintf(line, id), time.Time{})
		if err != nil {
			return err
		}
		if st, err = rt.Deliver(ctx, id, env); err != nil {
			return err
		}
	}
	if st.Status != pipeline.StatusDone {
		return fmt.Errorf("story %s ended %s", id, st.Status)
	}
	return nil
}

// storyWorld is every service of the Runtime, doing nothing but what a
// real worker would leave on the board for the checks of the next report:
// a stage 1 worker moves the story to Todo, a stage 2 worker to To Review.
type storyWorld struct {
	nopWorld
	board sync.Map // foreman.ItemID -> board status
}

func newStoryWorld() *storyWorld { return &storyWorld{} }

func (w *storyWorld) Spawn(_ context.Context, r pipeline.SpawnRequest) error {
	switch r.Stage {
	case 1:
		w.board.Store(r.Item, pipeline.BoardTodo)
	case 2:
		w.board.Store(r.Item, pipeline.BoardToReview)
	}
	return nil
}

func (w *storyWorld) SetStatus(_ context.Context, id foreman.ItemID, _ string) error {
	w.board.Delete(id) // only the DONE status is set: the story is over
	return nil
}

func (w *storyWorld) Story(_ context.Context, id foreman.ItemID) (pipeline.BoardStory, error) {
	status, _ := w.board.Load(id)
	s, _ := status.(string)
	return pipeline.BoardStory{Found: true, Tasks: 1, Status: s}, nil
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// resetPeakRSS starts the kernel's peak-RSS count (VmHWM) afresh; it does
// nothing where /proc/self/clear_refs is missing.
func resetPeakRSS() { _ = os.WriteFile("/proc/self/clear_refs", []byte("5"), 0) }

// peakRSSMB reads VmHWM from /proc/self/status, in MB; 0 when unknown.
func peakRSSMB() float64 {
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	lines := bufio.NewScanner(bytes.NewReader(data))
	for lines.Scan() {
		if rest, ok := bytes.CutPrefix(lines.Bytes(), []byte("VmHWM:")); ok {
			kb, err := strconv.ParseFloat(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte(" kB"))), 64)
			if err != nil {
				return 0
			}
			return kb / 1024
		}
	}
	return 0
}
