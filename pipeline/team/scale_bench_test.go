package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
)

// The coordinator at scale (issue 23): independent no-op stories through
// the team with an in-memory store and repository (worktrees and merges
// that do nothing, a snapshot with a change, gates that pass, an agent
// that reports its stage at once), so that what is measured is the
// coordinator itself: its CPU per story at 100, 1,000 and 10,000 stories
// (cpu-ms/story; the ratio to 100 is reported as x100), then, on the
// state the run left, Status in process, Summary, one story's StatusOf,
// the full read the status view replaced (old-full-read), and ReadStatus
// from the team's state copied into a SQLite file (what another process
// reads).
//
// Each run also reports the process's peak resident set so far
// (getrusage's maxrss, peak-rss-MB, read as the run ends):
// FOREMAN_SCALE_SIZES=10000 runs one size alone, so that the peak is that
// size's, in-memory store included; and the heap live after the run
// (heap-live-MB: allocated after a GC). FOREMAN_SCALE_HEAP writes a heap
// profile after the run; FOREMAN_SCALE_KINDS=1 logs, for the memory
// store, how many records of each kind it holds and their bytes.
//
//	go test -run '^$' -bench Scale -benchtime 20x -timeout 30m ./pipeline/team/
//	FOREMAN_SCALE_SIZES=10000 go test -run '^$' -bench 'Scale$/run' -timeout 30m ./pipeline/team/
//	FOREMAN_SCALE_STORE=sqlite FOREMAN_SCALE_SIZES=10000 go test -run '^$' -bench 'Scale$/run' -timeout 30m ./pipeline/team/
func BenchmarkScale(b *testing.B) {
	var cpuAt100 float64
	for _, n := range scaleSizes(b) {
		tm, mem, repo := scaleTeam(b, n)
		// One run of n stories (not repeated per b.N): its figures are
		// reported by the run sub-benchmark.
		stories := make([]team.Story, n)
		for i := range stories {
			stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S%05d", i)), Title: "bench"}
		}
		require.NoError(b, tm.Add(context.Background(), stories...))
		cpu0, wall0 := processCPU(b), time.Now()
		res, err := tm.Run(context.Background())
		cpu, wall := processCPU(b)-cpu0, time.Since(wall0)
		require.NoError(b, err)
		require.Equal(b, n, res.Merged, res.String())
		peak := peakRSSMB(b) // before anything after the run can add to it
		writeHeap(b, n)
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		cpuPerStory := float64(cpu.Microseconds()) / 1000 / float64(n)
		if n == 100 {
			cpuAt100 = cpuPerStory
		}
		b.Run(fmt.Sprintf("run/%d", n), func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(cpuPerStory, "cpu-ms/story")
			b.ReportMetric(float64(wall.Microseconds())/1000/float64(n), "ms/story")
			if cpuAt100 > 0 {
				b.ReportMetric(cpuPerStory/cpuAt100, "x100")
			}
			b.ReportMetric(peak, "peak-rss-MB")
			b.ReportMetric(float64(ms.HeapAlloc)/1e6, "heap-live-MB")
		})
		if mem != nil && os.Getenv("FOREMAN_SCALE_KINDS") != "" {
			logKinds(b, mem)
		}
		ctx := context.Background()
		b.Run(fmt.Sprintf("status/%d", n), func(b *testing.B) {
			for b.Loop() {
				st, err := tm.Status(ctx)
				require.NoError(b, err)
				require.Len(b, st.Stories, n)
			}
		})
		b.Run(fmt.Sprintf("summary/%d", n), func(b *testing.B) {
			for b.Loop() {
				_, err := tm.Summary(ctx)
				require.NoError(b, err)
			}
		})
		b.Run(fmt.Sprintf("statusof/%d", n), func(b *testing.B) {
			for b.Loop() {
				_, err := tm.StatusOf(ctx, "S00042")
				require.NoError(b, err)
			}
		})
		b.Run(fmt.Sprintf("old-full-read/%d", n), func(b *testing.B) {
			for b.Loop() {
				_, err := team.OldStatuses(tm, ctx)
				require.NoError(b, err)
			}
		})
		if mem != nil {
			copyToSQLite(b, mem, filepath.Join(repo, team.StateDirName, "foreman.db"))
		}
		b.Run(fmt.Sprintf("readstatus/%d", n), func(b *testing.B) {
			for b.Loop() {
				st, err := team.ReadStatus(ctx, team.Config{Repo: repo})
				require.NoError(b, err)
				require.Len(b, st.Stories, n)
			}
		})
		require.NoError(b, tm.Close())
	}
}

// scaleTeam is a team on an in-memory store and repository; with
// FOREMAN_SCALE_STORE=sqlite, on the team's default store instead (SQLite
// in the repository), whose records live on disk (the store returned is
// then nil).
func scaleTeam(b *testing.B, n int) (*team.Team, store.Store, string) {
	repo := benchRepo(b)
	var mem store.Store
	if os.Getenv("FOREMAN_SCALE_STORE") != "sqlite" {
		mem = store.NewMemory(store.MemoryOptions{})
	}
	var commits atomic.Int64
	tm, err := team.New(context.Background(), team.Config{
		Repo: repo, Workers: 16, Store: mem, Agent: lineAgent{}, Gates: gatePlan(),
		Snapshotter: changedSnapshot{}, Verifier: passingVerifier{},
		Worktrees: memWorktrees{}, Merger: memMerger{n: &commits},
	})
	require.NoError(b, err)
	return tm, mem, repo
}

// lineAgent reports each stage with its canonical line (and its
// assignment's proof) and does nothing.
type lineAgent struct{}

func (lineAgent) Execute(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
	a, ok := pipeline.ParseAssignment(req.TaskPrompt)
	if !ok {
		return phases.AgentResult{}, fmt.Errorf("no assignment")
	}
	line := fmt.Sprintf("%s [assignment %s key %s]", benchLine(a.Item, a.Stage), a.Assignment, envOf(req.Env, team.EnvReportKey))
	return phases.AgentResult{Success: true, Result: line}, nil
}

type memWorktrees struct{}

func (memWorktrees) CreateWorktree(context.Context, foreman.ItemID) error { return nil }
func (memWorktrees) RemoveWorktree(context.Context, foreman.ItemID) error { return nil }

type memMerger struct{ n *atomic.Int64 }

func (m memMerger) Merge(context.Context, pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return pipeline.MergeOutcome{Commit: fmt.Sprintf("%040x", m.n.Add(1))}, nil
}

// copyToSQLite writes every record of the kinds the team keeps into a new
// SQLite file, 1,000 to a transaction.
func copyToSQLite(b *testing.B, mem store.Store, path string) {
	ctx := context.Background()
	db, err := sqlitestore.Open(ctx, path, sqlitestore.Options{})
	require.NoError(b, err)
	defer db.Close()
	for _, kind := range teamKinds {
		recs, err := mem.List(ctx, kind)
		require.NoError(b, err)
		for len(recs) > 0 {
			k := min(len(recs), 1000)
			ops := make([]store.Op, k)
			for i, r := range recs[:k] {
				ops[i] = store.Op{Kind: r.Kind, ID: r.ID, Data: r.Data}
			}
			_, err := db.Apply(ctx, ops...)
			require.NoError(b, err)
			recs = recs[k:]
		}
	}
}

// teamKinds are the kinds of records a team writes.
var teamKinds = []string{"item", "taskgraph.session", "taskgraph.task", "team.story", "team.board", "team.base",
	"team.decision", "team.memory", "team.triage", "team.usage", "team.refused", "team.secret", "team.session",
	"team.event", "team.events", "team.eventseq", "team.view", "team.viewsum", "team.runstart"}

// logKinds logs how many records of each kind mem holds and the bytes of
// their data.
func logKinds(b *testing.B, mem store.Store) {
	for _, kind := range teamKinds {
		recs, err := mem.List(context.Background(), kind)
		require.NoError(b, err)
		size := 0
		for _, r := range recs {
			size += len(r.Data)
		}
		if len(recs) > 0 {
			b.Logf("%-18s %7d records %10d bytes of data", kind, len(recs), size)
		}
	}
}

// scaleSizes are the plan sizes BenchmarkScale runs: FOREMAN_SCALE_SIZES
// (comma-separated), default 100, 1,000 and 10,000.
func scaleSizes(b *testing.B) []int {
	v := os.Getenv("FOREMAN_SCALE_SIZES")
	if v == "" {
		return []int{100, 1000, 10000}
	}
	var sizes []int
	for _, f := range strings.Split(v, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		require.NoError(b, err, "FOREMAN_SCALE_SIZES")
		sizes = append(sizes, n)
	}
	return sizes
}

// writeHeap writes the heap in use after a run of n stories to
// $FOREMAN_SCALE_HEAP.n (a profile for go tool pprof), when it is set.
func writeHeap(b *testing.B, n int) {
	path := os.Getenv("FOREMAN_SCALE_HEAP")
	if path == "" {
		return
	}
	f, err := os.Create(fmt.Sprintf("%s.%d", path, n))
	require.NoError(b, err)
	defer f.Close()
	runtime.GC()
	require.NoError(b, pprof.WriteHeapProfile(f))
}

// peakRSSMB is the process's peak resident set so far (maxrss, which Linux
// reports in KiB), in MB.
func peakRSSMB(b *testing.B) float64 {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return float64(ru.Maxrss) * 1024 / 1e6
}

// processCPU is the process's user+system CPU time.
func processCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_SELF, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkScaleGit: one run of FOREMAN_SCALE_GIT_STORIES (default 1,000)
// independent no-op stories through the team on a real repository (a git
// worktree per story, the build's commit by a shell, the squash merge)
// with the team's default store (SQLite in the repository), 16 workers;
// and, in the same process just before it, as many through the in-memory
// team of BenchmarkScale. Reported per story for each: the coordinator's
// own CPU (cpu-ms/story; for git, the ratio to the in-memory run as
// x-memory), the CPU of the processes it started (children-cpu-ms/story:
// git and the build's shell) and the wall time. The snapshotter and gates
// are no-ops in both, as in BenchmarkTeamStory.
//
//	go test -run '^$' -bench ScaleGit -timeout 60m ./pipeline/team/
func BenchmarkScaleGit(b *testing.B) {
	n := 1000
	if v := os.Getenv("FOREMAN_SCALE_GIT_STORIES"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(b, err, "FOREMAN_SCALE_GIT_STORIES")
	}
	stories := make([]team.Story, n)
	for i := range stories {
		stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S%05d", i)), Title: "bench"}
	}
	var memCPU float64
	for _, kind := range []string{"memory", "git"} {
		var tm *team.Team
		if kind == "memory" {
			tm, _, _ = scaleTeam(b, n)
		} else {
			var err error
			tm, err = team.New(context.Background(), team.Config{
				Repo: benchRepo(b), Workers: 16, Agent: benchAgent{}, Gates: gatePlan(),
				Snapshotter: changedSnapshot{}, Verifier: passingVerifier{},
				Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
			})
			require.NoError(b, err)
		}
		require.NoError(b, tm.Add(context.Background(), stories...))
		cpu0, child0, wall0 := processCPU(b), childrenCPU(b), time.Now()
		res, err := tm.Run(context.Background())
		cpu, child, wall := processCPU(b)-cpu0, childrenCPU(b)-child0, time.Since(wall0)
		require.NoError(b, err)
		require.Equal(b, n, res.Merged, res.String())
		require.NoError(b, tm.Close())
		perStory := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(n) }
		if kind == "memory" {
			memCPU = perStory(cpu)
		}
		b.Run(fmt.Sprintf("%s/%d", kind, n), func(b *testing.B) {
			for b.Loop() {
			}
			b.ReportMetric(perStory(cpu), "cpu-ms/story")
			b.ReportMetric(perStory(child), "children-cpu-ms/story")
			b.ReportMetric(perStory(wall), "ms/story")
			if kind == "git" {
				b.ReportMetric(perStory(cpu)/memCPU, "x-memory")
			}
		})
	}
}

// childrenCPU is the user+system CPU time of the processes this one
// started and waited for.
func childrenCPU(b *testing.B) time.Duration {
	var ru syscall.Rusage
	require.NoError(b, syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ru))
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
