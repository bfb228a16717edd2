package riverbench

import (
	"context"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
)

// walMeter measures the WAL the server wrote over a run (every writer's:
// the benchmarks run alone on their throwaway server), a figure that the
// load of other processes on the machine does not move: what a hand-off
// or a job costs the database in writes.
type walMeter struct {
	pool  *pgxpool.Pool
	start string
}

func startWAL(b *testing.B, pool *pgxpool.Pool) *walMeter {
	m := &walMeter{pool: pool}
	if err := pool.QueryRow(context.Background(), `SELECT pg_current_wal_lsn()::text`).Scan(&m.start); err != nil {
		b.Fatal(err)
	}
	return m
}

// report reports the WAL bytes per hand-off (or job) since start.
func (m *walMeter) report(b *testing.B) {
	var bytes float64
	if err := m.pool.QueryRow(context.Background(), `SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), $1::pg_lsn)::float8`, m.start).Scan(&bytes); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(bytes/float64(b.N), "wal-bytes/op")
}
