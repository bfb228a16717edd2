package riverbench

import (
	"cmp"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/pprof"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// The same concurrency for both: 64 jobs in flight. Foreman's are spread
// over 4 worker hosts of 16 (each host with its own connection pool, as
// separate processes would have); river's are one client's 64 workers.
const (
	inFlight       = 64
	hosts          = 4
	insertRoutines = 8
	// linger: hosts gather their runs' messages this long before a round trip.
	linger = 5 * time.Millisecond
)

func database(b *testing.B) *pgxpool.Pool {
	b.Helper()
	url := os.Getenv("FOREMAN_TEST_POSTGRES")
	if url == "" {
		b.Skip("riverbench: FOREMAN_TEST_POSTGRES is not set; run under ../../.ci/with-postgres")
	}
	return newPool(b, url, 16)
}

func newPool(b *testing.B, url string, conns int32) *pgxpool.Pool {
	b.Helper()
	cfg, err := pgxpool.ParseConfig(url)
	if err != nil {
		b.Fatal(err)
	}
	cfg.MaxConns = conns
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(pool.Close)
	return pool
}

// freshSchema returns a schema name dropped when the benchmark ends.
func freshSchema(b *testing.B, pool *pgxpool.Pool, prefix string) string {
	b.Helper()
	var r [5]byte
	_, _ = rand.Read(r[:])
	s := prefix + hex.EncodeToString(r[:])
	b.Cleanup(func() {
		_, _ = pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE")
	})
	return s
}

func report(b *testing.B, start time.Time) {
	b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "handoffs/s")
}

// reportCPU reports the CPU time per hand-off of the benchmark's processes
// (this one and its host processes) and of PostgreSQL's.
func reportCPU(b *testing.B, m *cpuMeter) {
	client, pg := m.stop()
	b.ReportMetric(float64(client.Microseconds())/float64(b.N), "client-cpu-µs/op")
	b.ReportMetric(float64(pg.Microseconds())/float64(b.N), "pg-cpu-µs/op")
}

// BenchmarkHandoffs: b.N durable hand-offs each (use -benchtime Nx).
func BenchmarkHandoffs(b *testing.B) {
	b.Run("foreman", func(b *testing.B) { benchForeman(b, setup{linger: linger}) })
	b.Run("foreman-processes", func(b *testing.B) { benchForeman(b, setup{processes: true, linger: linger}) })
	b.Run("foreman-processes-nolinger", func(b *testing.B) { benchForeman(b, setup{processes: true}) })
	// River's shape: one worker process of 64, as river's benchmark runs
	// one client of its workers (default host settings: no linger).
	b.Run("foreman-1x64", func(b *testing.B) { benchForeman(b, setup{processes: true, hosts: 1, capacity: inFlight}) })
	// The same default hosts with 1,024 assignments handed out, not 256:
	// with 256 the hosts wait for the coordinator's next write part of
	// the time (its reads come every ReadCooldown) and their rounds carry
	// about 11 hand-offs of the 16 they could.
	b.Run("foreman-processes-nolinger-1024", func(b *testing.B) { benchForeman(b, setup{processes: true, dispatch: 1024}) })
	// The default hosts before HostConfig.Cooldown: a round at once on
	// every message.
	b.Run("foreman-processes-nocooldown", func(b *testing.B) { benchForeman(b, setup{processes: true, cooldown: -1}) })
	b.Run("foreman-processes-cooldown2ms", func(b *testing.B) {
		benchForeman(b, setup{processes: true, cooldown: 2 * time.Millisecond})
	})
	// Foreman at its best on this benchmark: 4 hosts of 256 in this
	// process, 4,096 assignments handed out, linger 5 ms (against river's
	// 2,000 workers: each at full tilt). Its rate is bounded by how many
	// are out over how long a hand-off's cycle takes (claim, run, DONE
	// written, read, the next assignment written), not by the CPU: with
	// 2 hosts of 128 and 1,024 out (foreman-best-1024, the earlier
	// rounds' setting) the benchmark's process used about a third of a
	// core. Since transport schema 7 the coordinator's promise to poll
	// holds however many are out, so more out costs no notifications.
	b.Run("foreman-best", func(b *testing.B) {
		benchForeman(b, setup{hosts: 4, capacity: 256, dispatch: 4096, linger: linger})
	})
	b.Run("foreman-best-1024", func(b *testing.B) {
		benchForeman(b, setup{hosts: 2, capacity: 128, dispatch: 1024, linger: linger})
	})
	b.Run("foreman-env", func(b *testing.B) { benchForeman(b, envSetup(b)) })
	b.Run("river-defaults-64", func(b *testing.B) { benchRiver(b, riverDefaults, inFlight, true) })
	b.Run("river-tuned-64-insert", func(b *testing.B) { benchRiver(b, riverTuned, inFlight, false) })
	b.Run("river-tuned-64", func(b *testing.B) { benchRiver(b, riverTuned, inFlight, true) })
	b.Run("river-tuned-2000", func(b *testing.B) { benchRiver(b, riverTuned, 2000, true) })
	// Foreman's default shape for river: 4 worker processes of 16, the
	// jobs inserted by this process.
	b.Run("river-tuned-4x16", func(b *testing.B) { benchRiverProcesses(b, riverTuned, hosts, inFlight/hosts) })
}

// riverSettings are a river client's fetch settings.
type riverSettings struct {
	fetchCooldown, fetchPollInterval time.Duration
}

var (
	// riverDefaults: river's own defaults (zero values: FetchCooldown
	// 100 ms, FetchPollInterval 1 s), labelled "river at its defaults".
	riverDefaults = riverSettings{}
	// riverTuned: the settings river's own benchmark gives its client
	// (cmd/river/riverbench/river_bench.go: FetchCooldown 2 ms,
	// FetchPollInterval 20 ms; it runs 2,000 workers). Everything else is
	// river's default there as here.
	riverTuned = riverSettings{fetchCooldown: 2 * time.Millisecond, fetchPollInterval: 20 * time.Millisecond}
)

// setup is how Foreman's side runs: hosts in this process (each with its
// own connection pool) or, with processes, as separate processes (this
// test binary run again, see TestMain); how many hosts of what capacity
// (default 4 of 16: 64 in flight); the Dispatcher's MaxWorkers, how many
// assignments are handed out at once (default 4 x in flight); and the
// hosts' Linger and Cooldown (0: the default; negative: none).
type setup struct {
	processes        bool
	hosts, capacity  int
	dispatch         int
	linger, cooldown time.Duration
}

func (s setup) resolve() setup {
	s.hosts = cmp.Or(s.hosts, hosts)
	s.capacity = cmp.Or(s.capacity, inFlight/hosts)
	s.dispatch = cmp.Or(s.dispatch, 4*s.hosts*s.capacity)
	return s
}

// envSetup reads a setup from RIVERBENCH_SETUP
// ("processes hosts capacity dispatch linger [cooldown]", e.g.
// "1 4 16 256 0s -1s"); the benchmark skips without it (an aid for trying
// settings).
func envSetup(b *testing.B) setup {
	v := os.Getenv("RIVERBENCH_SETUP")
	if v == "" {
		b.Skip("RIVERBENCH_SETUP is not set")
	}
	var s setup
	var proc int
	var l string
	cd := "0s"
	if n, err := fmt.Sscan(v, &proc, &s.hosts, &s.capacity, &s.dispatch, &l, &cd); n < 5 {
		b.Fatal("RIVERBENCH_SETUP:", err)
	}
	s.processes = proc != 0
	var err error
	if s.linger, err = time.ParseDuration(l); err != nil {
		b.Fatal("RIVERBENCH_SETUP:", err)
	}
	if s.cooldown, err = time.ParseDuration(cd); err != nil {
		b.Fatal("RIVERBENCH_SETUP:", err)
	}
	return s
}

func benchForeman(b *testing.B, s setup) {
	s = s.resolve()
	processes, linger, cooldown := s.processes, s.linger, s.cooldown
	ctx := context.Background()
	pool := database(b)
	schema := freshSchema(b, pool, "riverbench_foreman_")
	st, err := pgstore.OpenPool(ctx, pool, pgstore.Options{Schema: schema})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	leader, err := st.TryLead(ctx, pgstore.LeaseOptions{Holder: "bench"})
	if err != nil {
		b.Fatal(err)
	}
	defer leader.Resign(ctx)
	rc, _ := time.ParseDuration(os.Getenv("RIVERBENCH_READ_COOLDOWN"))
	tr, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: pool, Store: st, Leader: leader, ReadCooldown: rc})
	if err != nil {
		b.Fatal(err)
	}
	completed := make(chan struct{}, b.N)
	d, err := worker.New(worker.Config{Transport: tr, MaxWorkers: s.dispatch, Commits: worker.NoCommits,
		OnEvent: func(e worker.Event) {
			if e.Kind == worker.EventCompleted {
				completed <- struct{}{}
			}
		}})
	if err != nil {
		b.Fatal(err)
	}
	tr.Start(d)
	hctx, stopHosts := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var hs []*pgtransport.Host
	var pids []int
	for i := range s.hosts {
		name := fmt.Sprintf("host-%d", i)
		if processes {
			cmd, _ := startChild(b, hctx, &wg, hostProcessEnv+"="+schema, "RIVERBENCH_HOST_NAME="+name, "RIVERBENCH_LINGER="+linger.String(),
				"RIVERBENCH_COOLDOWN="+cooldown.String(), fmt.Sprintf("RIVERBENCH_CAPACITY=%d", s.capacity))
			pids = append(pids, cmd.Process.Pid)
			continue
		}
		h, err := newHost(ctx, newPool(b, os.Getenv("FOREMAN_TEST_POSTGRES"), 4), schema, name, s.capacity, linger, cooldown)
		if err != nil {
			b.Fatal(err)
		}
		hs = append(hs, h)
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Run(hctx) }()
	}
	b.ResetTimer()
	resetStatements(b, pool)
	cpu := startCPU(pool, pids)
	wal := startWAL(b, pool)
	start := time.Now()
	for i := range b.N {
		if err := d.Submit(ctx, worker.Item{ID: foreman.ItemID(fmt.Sprintf("item-%d", i)), Prompt: "noop", Worktree: "/nowhere"}); err != nil {
			b.Fatal(err)
		}
	}
	for range b.N {
		<-completed
	}
	report(b, start)
	reportCPU(b, cpu)
	wal.report(b)
	dumpStatements(b, pool)
	b.StopTimer()
	var rounds int64
	for _, h := range hs {
		rounds += h.Stats().Rounds
		if os.Getenv("RIVERBENCH_HOSTSTATS") != "" {
			b.Logf("%s: %+v", h.Name(), h.Stats())
		}
	}
	if !processes {
		b.ReportMetric(float64(rounds)/float64(b.N), "host-rounds/handoff")
	}
	cs := tr.Stats()
	b.ReportMetric(float64(cs.Writes)/float64(b.N), "writes/handoff")
	b.ReportMetric(float64(cs.Reads)/float64(b.N), "reads/handoff")
	_ = d.Close()
	stopHosts()
	wg.Wait()
}

// hostProcessEnv makes the test binary a worker host process serving the
// schema it names.
const hostProcessEnv = "RIVERBENCH_HOST_SCHEMA"

func TestMain(m *testing.M) {
	if schema := os.Getenv(hostProcessEnv); schema != "" {
		os.Exit(runHostProcess(schema))
	}
	if schema := os.Getenv(beatProcessEnv); schema != "" {
		os.Exit(runBeatProcess(schema))
	}
	if schema := os.Getenv(riverProcessEnv); schema != "" {
		os.Exit(runRiverProcess(schema))
	}
	os.Exit(m.Run())
}

func runHostProcess(schema string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	if dir := os.Getenv("RIVERBENCH_HOST_CPUPROFILE"); dir != "" { // a profiling aid: a CPU profile per host process
		f, err := os.Create(filepath.Join(dir, os.Getenv("RIVERBENCH_HOST_NAME")+".prof"))
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	if dir := os.Getenv("RIVERBENCH_HOST_MEMPROFILE"); dir != "" { // and its allocations, written as it stops
		defer func() {
			if f, err := os.Create(filepath.Join(dir, os.Getenv("RIVERBENCH_HOST_NAME")+".mem")); err == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				_ = f.Close()
			}
		}()
	}
	pool, err := pgxpool.New(ctx, os.Getenv("FOREMAN_TEST_POSTGRES"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	linger, err := time.ParseDuration(os.Getenv("RIVERBENCH_LINGER"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cooldown, err := time.ParseDuration(os.Getenv("RIVERBENCH_COOLDOWN"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	capacity, err := strconv.Atoi(os.Getenv("RIVERBENCH_CAPACITY"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	h, err := newHost(ctx, pool, schema, os.Getenv("RIVERBENCH_HOST_NAME"), capacity, linger, cooldown)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	fmt.Println("ready")
	_ = h.Run(ctx)
	if os.Getenv("RIVERBENCH_HOSTSTATS") != "" {
		fmt.Fprintf(os.Stderr, "%s: %+v\n", h.Name(), h.Stats())
	}
	return 0
}

// newHost is a worker host whose agent does nothing and succeeds.
func newHost(ctx context.Context, pool *pgxpool.Pool, schema, name string, capacity int, linger, cooldown time.Duration) (*pgtransport.Host, error) {
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true}, nil
	})
	return pgtransport.NewHost(ctx, pgtransport.HostConfig{
		Pool: pool, Schema: schema, Name: name, Capacity: capacity, Linger: linger, Cooldown: cooldown,
		Runtime: worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits},
	})
}
