package riverbench

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// The remote workers of BenchmarkHeartbeats: beatRuns runs, each on a
// simulated remote host, beatProcs processes of beatHostsPerProc
// pgtransport.Host instances each, every run heartbeating every 10 s (the
// Runtime's default) and never finishing. RIVERBENCH_BEAT_RUNS and
// RIVERBENCH_BEAT_HOSTS (hosts per process) change them;
// RIVERBENCH_BEAT_NOLISTEN=1 makes the hosts poll without LISTEN (each
// listening host holds a connection of its own: PostgreSQL's
// max_connections bounds how many hosts can listen).
const (
	beatRuns         = 10_000
	beatProcs        = 4
	beatHostsPerProc = 25
	beatPeriod       = 10 * time.Second // worker.RuntimeConfig's default HeartbeatInterval
	// beatProcessEnv makes the test binary a process of simulated hosts.
	beatProcessEnv = "RIVERBENCH_BEAT_SCHEMA"
)

// beatCounter sits between the coordinator and the Dispatcher: it counts
// the runs that have heartbeated at least once.
type beatCounter struct {
	next    worker.Inbox
	mu      sync.Mutex
	seen    map[foreman.AssignmentID]bool
	started atomic.Int64
	beats   atomic.Int64
	want    int64
	all     chan struct{} // closed once want runs have heartbeated
}

func (c *beatCounter) Deliver(ctx context.Context, m worker.Message) (worker.Disposition, error) {
	if m.Kind == worker.MsgHeartbeat {
		c.beats.Add(1)
		c.mu.Lock()
		if !c.seen[m.Assignment] {
			c.seen[m.Assignment] = true
			if c.started.Add(1) == c.want {
				close(c.all)
			}
		}
		c.mu.Unlock()
	}
	return c.next.Deliver(ctx, m)
}

func envInt(b *testing.B, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("%s=%q: want a positive number", name, v)
	}
	return n
}

// dbCounters are PostgreSQL's cumulative counters for the database.
type dbCounters struct {
	commits, updated, inserted, deleted int64
	wal                                 int64 // WAL bytes written
	// The assignment table's updates, and those of them that were HOT
	// (no index entry written).
	assignUpdates, assignHOT int64
}

func readCounters(b *testing.B, pool *pgxpool.Pool, schema string) dbCounters {
	ctx := context.Background()
	var c dbCounters
	if _, err := pool.Exec(ctx, `SELECT pg_stat_clear_snapshot()`); err != nil {
		b.Fatal(err)
	}
	err := pool.QueryRow(ctx, `SELECT xact_commit, tup_updated, tup_inserted, tup_deleted,
		pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::bigint
		FROM pg_stat_database WHERE datname = current_database()`).Scan(&c.commits, &c.updated, &c.inserted, &c.deleted, &c.wal)
	if err != nil {
		b.Fatal(err)
	}
	err = pool.QueryRow(ctx, `SELECT n_tup_upd, n_tup_hot_upd FROM pg_stat_user_tables
		WHERE schemaname = $1 AND relname = 'wt_assignments'`, schema).Scan(&c.assignUpdates, &c.assignHOT)
	if err != nil {
		b.Fatal(err)
	}
	return c
}

// BenchmarkHeartbeats: 10,000 runs on remote worker hosts, heartbeating
// through PostgreSQL to one coordinator; each op is one heartbeat period
// (10 s) of steady state (use -benchtime 3x). Reported: the coordinator's
// process CPU (coordinator-cpu-%, of one core), PostgreSQL's (pg-cpu-%, all
// its processes), the host processes' (hosts-cpu-%), transactions
// committed, rows updated and WAL bytes per second, and heartbeats the
// Dispatcher received per second, and the share of the assignment table's
// updates that were HOT (wrote no index entry).
func BenchmarkHeartbeats(b *testing.B) {
	runs := envInt(b, "RIVERBENCH_BEAT_RUNS", beatRuns)
	hostsPerProc := envInt(b, "RIVERBENCH_BEAT_HOSTS", beatHostsPerProc)
	capacity := (runs + beatProcs*hostsPerProc - 1) / (beatProcs * hostsPerProc)
	ctx := context.Background()
	pool := database(b)
	schema := freshSchema(b, pool, "riverbench_beats_")
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
	tr, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: pool, Store: st, Leader: leader})
	if err != nil {
		b.Fatal(err)
	}
	d, err := worker.New(worker.Config{Transport: tr, MaxWorkers: runs, Commits: worker.NoCommits})
	if err != nil {
		b.Fatal(err)
	}
	counter := &beatCounter{next: d, seen: map[foreman.AssignmentID]bool{}, want: int64(runs), all: make(chan struct{})}
	tr.Start(counter)

	hctx, stopHosts := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var pids []int
	for p := range beatProcs {
		cmd, _ := startChild(b, hctx, &wg, beatProcessEnv+"="+schema, fmt.Sprintf("RIVERBENCH_BEAT_PROC=%d", p),
			fmt.Sprintf("RIVERBENCH_BEAT_HOSTS=%d", hostsPerProc), fmt.Sprintf("RIVERBENCH_CAPACITY=%d", capacity),
			"RIVERBENCH_BEAT_NOLISTEN="+os.Getenv("RIVERBENCH_BEAT_NOLISTEN"))
		pids = append(pids, cmd.Process.Pid)
	}
	defer func() {
		_ = d.Close()
		stopHosts()
		wg.Wait()
	}()
	begin := time.Now()
	for i := range runs {
		if err := d.Submit(ctx, worker.Item{ID: foreman.ItemID(fmt.Sprintf("run-%d", i)), Prompt: "beat", Worktree: "/nowhere"}); err != nil {
			b.Fatal(err)
		}
	}
	select {
	case <-counter.all:
	case <-time.After(5 * time.Minute):
		b.Fatalf("only %d of %d runs heartbeated after 5 minutes", counter.started.Load(), runs)
	}
	b.Logf("%d runs on %d hosts (%d processes) started in %s", runs, beatProcs*hostsPerProc, beatProcs, time.Since(begin).Round(time.Millisecond))
	time.Sleep(beatPeriod) // one period to settle: every run has beaten on its own clock since

	b.ResetTimer()
	cpu := startCPU(pool, nil)
	hostCPU := startCPU(pool, pids)
	before, beats := readCounters(b, pool, schema), counter.beats.Load()
	start := time.Now()
	time.Sleep(time.Duration(b.N) * beatPeriod)
	el := time.Since(start).Seconds()
	after := readCounters(b, pool, schema)
	coord, pg := cpu.stop()
	withHosts, _ := hostCPU.stop()
	b.StopTimer()
	pct := func(d time.Duration) float64 { return 100 * d.Seconds() / el }
	b.ReportMetric(pct(coord), "coordinator-cpu-%")
	b.ReportMetric(pct(pg), "pg-cpu-%")
	b.ReportMetric(pct(withHosts-coord), "hosts-cpu-%")
	b.ReportMetric(float64(after.commits-before.commits)/el, "commits/s")
	b.ReportMetric(float64(after.updated-before.updated)/el, "rows-updated/s")
	b.ReportMetric(float64(after.inserted+after.deleted-before.inserted-before.deleted)/el, "rows-ins+del/s")
	b.ReportMetric(float64(after.wal-before.wal)/el/1024, "wal-KiB/s")
	if n := after.assignUpdates - before.assignUpdates; n > 0 {
		b.ReportMetric(100*float64(after.assignHOT-before.assignHOT)/float64(n), "hot-updates-%")
	}
	b.ReportMetric(float64(counter.beats.Load()-beats)/el, "beats/s")
	b.ReportMetric(0, "ns/op")
}

// runBeatProcess runs RIVERBENCH_BEAT_HOSTS simulated remote hosts (of
// RIVERBENCH_CAPACITY runs each) sharing one connection pool, until
// SIGTERM; every run's agent waits for its end.
func runBeatProcess(schema string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	hosts, err1 := strconv.Atoi(os.Getenv("RIVERBENCH_BEAT_HOSTS"))
	capacity, err2 := strconv.Atoi(os.Getenv("RIVERBENCH_CAPACITY"))
	if err1 != nil || err2 != nil {
		fmt.Fprintln(os.Stderr, "beat process: bad RIVERBENCH_BEAT_HOSTS or RIVERBENCH_CAPACITY")
		return 2
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv("FOREMAN_TEST_POSTGRES"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	cfg.MaxConns = 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 2
	}
	defer pool.Close()
	agent := worker.AgentFunc(func(ctx context.Context, _ phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		<-ctx.Done()
		return phases.AgentResult{}, ctx.Err()
	})
	var wg sync.WaitGroup
	for i := range hosts {
		h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{
			Pool: pool, Schema: schema, Name: fmt.Sprintf("p%s-h%d", os.Getenv("RIVERBENCH_BEAT_PROC"), i), Capacity: capacity,
			NoListen: os.Getenv("RIVERBENCH_BEAT_NOLISTEN") == "1",
			Runtime:  worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits},
		})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 2
		}
		wg.Add(1)
		go func() { defer wg.Done(); _ = h.Run(ctx) }()
	}
	fmt.Println("ready")
	wg.Wait()
	return 0
}
