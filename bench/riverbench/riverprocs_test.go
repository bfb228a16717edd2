package riverbench

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
)

// River spread over processes, the shape of Foreman's default hosts (4
// worker processes of 16): this process inserts (an insert-only client,
// as a river deployment whose web tier enqueues and whose workers run
// elsewhere), and each worker process (this test binary run again) runs a
// client with its share of the workers, configured as river's benchmark
// configures its one client. A worker process counts its completed jobs
// from its own subscription (sent after the completer's write, as in
// benchRiver) and prints the count on its standard output as jobs
// complete.
const riverProcessEnv = "RIVERBENCH_RIVER_SCHEMA"

func benchRiverProcesses(b *testing.B, set riverSettings, procs, workersEach int) {
	ctx := context.Background()
	pool := database(b)
	schema, driver := riverSchema(b, pool, "riverbench_riverp_")
	inserter, err := river.NewClient(driver, &river.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	pctx, stopProcs := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { stopProcs(); wg.Wait() }()
	completed := make(chan int, procs)
	var pids []int
	for range procs {
		cmd, lines := startChild(b, pctx, &wg, riverProcessEnv+"="+schema, fmt.Sprintf("RIVERBENCH_RIVER_WORKERS=%d", workersEach),
			"RIVERBENCH_RIVER_COOLDOWN="+set.fetchCooldown.String(), "RIVERBENCH_RIVER_POLL="+set.fetchPollInterval.String())
		pids = append(pids, cmd.Process.Pid)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for lines.Scan() {
				if n, err := strconv.Atoi(lines.Text()); err == nil {
					completed <- n
				}
			}
		}()
	}
	b.ResetTimer()
	resetStatements(b, pool)
	cpu := startCPU(pool, pids)
	wal := startWAL(b, pool)
	start := time.Now()
	insertJobs(b, inserter, b.N)
	for n := 0; n < b.N; {
		select {
		case c := <-completed:
			n += c
		case <-time.After(2 * time.Minute):
			b.Fatalf("only %d of %d jobs completed after 2 minutes without progress", n, b.N)
		}
	}
	report(b, start)
	reportCPU(b, cpu)
	wal.report(b)
	dumpStatements(b, pool)
	b.StopTimer()
}

// runRiverProcess runs one river client with RIVERBENCH_RIVER_WORKERS
// workers until SIGTERM, printing how many jobs completed as they do.
func runRiverProcess(schema string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	fail := func(err error) int { fmt.Fprintln(os.Stderr, "river process:", err); return 2 }
	workersEach, err := strconv.Atoi(os.Getenv("RIVERBENCH_RIVER_WORKERS"))
	if err != nil {
		return fail(err)
	}
	var set riverSettings
	if set.fetchCooldown, err = time.ParseDuration(os.Getenv("RIVERBENCH_RIVER_COOLDOWN")); err != nil {
		return fail(err)
	}
	if set.fetchPollInterval, err = time.ParseDuration(os.Getenv("RIVERBENCH_RIVER_POLL")); err != nil {
		return fail(err)
	}
	pool, err := pgxpool.New(ctx, os.Getenv("FOREMAN_TEST_POSTGRES"))
	if err != nil {
		return fail(err)
	}
	defer pool.Close()
	client, err := newRiverClient(riverpgxv5.New(pool), schema, set, workersEach)
	if err != nil {
		return fail(err)
	}
	done, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: 100_000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	if err := client.Start(ctx); err != nil {
		return fail(err)
	}
	out := bufio.NewWriter(os.Stdout)
	fmt.Fprintln(out, "ready")
	_ = out.Flush()
	for {
		select {
		case <-ctx.Done():
			_ = client.Stop(context.Background())
			return 0
		case <-done:
			n := 1
			for more := true; more; { // everything the completer's last write sent, in one line
				select {
				case <-done:
					n++
				default:
					more = false
				}
			}
			fmt.Fprintln(out, n)
			_ = out.Flush()
		}
	}
}
