package riverbench

import (
	"context"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// River's side of the hand-offs: no-op jobs, a client per process
// configured by riverSettings, and the same schema set-up and insertion
// for river in this process (benchRiver) and spread over processes
// (benchRiverProcesses, riverprocs_test.go).

type noopArgs struct{}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
}

func (noopWorker) Work(context.Context, *river.Job[noopArgs]) error { return nil }

// riverSchema makes a fresh schema with river's tables (dropped when the
// benchmark ends) and returns it with a driver on pool.
func riverSchema(b *testing.B, pool *pgxpool.Pool, prefix string) (string, *riverpgxv5.Driver) {
	b.Helper()
	ctx := context.Background()
	schema := freshSchema(b, pool, prefix)
	if _, err := pool.Exec(ctx, "CREATE SCHEMA "+pgx.Identifier{schema}.Sanitize()); err != nil {
		b.Fatal(err)
	}
	driver := riverpgxv5.New(pool)
	migrator, err := rivermigrate.New(driver, &rivermigrate.Config{Schema: schema, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		b.Fatal(err)
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		b.Fatal(err)
	}
	return schema, driver
}

// newRiverClient is a client of maxWorkers no-op workers with set's fetch
// settings, everything else river's default.
func newRiverClient(driver *riverpgxv5.Driver, schema string, set riverSettings, maxWorkers int) (*river.Client[pgx.Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{})
	return river.NewClient(driver, &river.Config{
		FetchCooldown: set.fetchCooldown, FetchPollInterval: set.fetchPollInterval,
		Schema: schema, Queues: map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: maxWorkers}},
		Workers: workers, Logger: slog.New(slog.DiscardHandler),
	})
}

// insertJobs inserts n no-op jobs with InsertMany in chunks of 500.
func insertJobs(b *testing.B, client *river.Client[pgx.Tx], n int) {
	const chunk = 500
	for i := 0; i < n; i += chunk {
		params := make([]river.InsertManyParams, min(chunk, n-i))
		for j := range params {
			params[j] = river.InsertManyParams{Args: noopArgs{}}
		}
		if _, err := client.InsertMany(context.Background(), params); err != nil {
			b.Fatal(err)
		}
	}
}

func benchRiver(b *testing.B, set riverSettings, maxWorkers int, many bool) {
	ctx := context.Background()
	pool := database(b)
	schema, driver := riverSchema(b, pool, "riverbench_river_")
	client, err := newRiverClient(driver, schema, set, maxWorkers)
	if err != nil {
		b.Fatal(err)
	}
	// Completed means marked completed in the database: river's completer
	// writes in batches and sends the subscription's events after the
	// write (river's own benchmark counts the same way), the counterpart
	// of a DONE delivered to the Dispatcher after it was written.
	done, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: b.N + 1000, Kinds: []river.EventKind{river.EventKindJobCompleted}})
	defer cancelSub()
	if err := client.Start(ctx); err != nil {
		b.Fatal(err)
	}
	defer func() { _ = client.Stop(ctx) }()
	b.ResetTimer()
	resetStatements(b, pool)
	cpu := startCPU(pool, nil)
	wal := startWAL(b, pool)
	start := time.Now()
	if many {
		insertJobs(b, client, b.N)
	} else {
		var wg sync.WaitGroup
		for g := range insertRoutines {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := g; i < b.N; i += insertRoutines {
					if _, err := client.Insert(ctx, noopArgs{}, nil); err != nil {
						b.Error(err)
						return
					}
				}
			}()
		}
		wg.Wait()
	}
	for range b.N {
		<-done
	}
	report(b, start)
	reportCPU(b, cpu)
	wal.report(b)
	dumpStatements(b, pool)
	b.StopTimer()
}
