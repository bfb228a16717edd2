package pgstore_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// BenchmarkApply measures durable one-op Applies per second (each a
// version-checked update of the caller's own record, committed with the
// server's fsync) on the same server in one run:
//
//   - serial: one caller, each Apply its own transaction: the latency floor;
//   - alone/callers=64: 64 callers, group commit off (MaxBatch 1), each Apply
//     its own transaction on its own connection, so only PostgreSQL's own
//     WAL group flush combines them: the baseline group commit must beat;
//   - group/writers=N/callers=64: 64 callers through group commit.
//
// Compare applies/s within one run: absolute figures depend on the disk
// and on what else the machine does.
func BenchmarkApply(b *testing.B) {
	const callers = 64
	url := databaseURL(b)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(b, err)
	cfg.MaxConns = callers + 4
	pool, err := pgxpool.NewWithConfig(b.Context(), cfg)
	require.NoError(b, err)
	b.Cleanup(pool.Close)
	// Connect every connection before timing: a new PostgreSQL backend
	// costs milliseconds, more on a busy machine.
	conns := make([]*pgxpool.Conn, cfg.MaxConns)
	for i := range conns {
		conns[i], err = pool.Acquire(b.Context())
		require.NoError(b, err)
	}
	for _, c := range conns {
		c.Release()
	}

	run := func(b *testing.B, opts pgstore.Options, parallel bool) {
		opts.Schema = newSchema(b)
		s, err := pgstore.OpenPool(b.Context(), pool, opts)
		require.NoError(b, err)
		b.Cleanup(func() { _ = s.Close() })
		var next atomic.Int64
		b.ResetTimer()
		if parallel {
			b.SetParallelism((callers + 1) / 2) // × GOMAXPROCS (2 here) goroutines
			b.RunParallel(func(pb *testing.PB) { updateLoop(b, s, fmt.Sprint(next.Add(1)), pb.Next) })
		} else {
			n := 0
			updateLoop(b, s, "serial", func() bool { n++; return n <= b.N })
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
		st := s.Stats()
		b.ReportMetric(float64(st.Applies)/float64(max(st.GroupCommits, 1)), "applies/commit")
	}
	b.Run("serial", func(b *testing.B) { run(b, pgstore.Options{MaxBatch: 1, Writers: 1}, false) })
	b.Run(fmt.Sprintf("alone/callers=%d", callers), func(b *testing.B) {
		run(b, pgstore.Options{MaxBatch: 1, Writers: callers}, true)
	})
	for _, writers := range []int{1, 2, 4} {
		b.Run(fmt.Sprintf("group/writers=%d/callers=%d", writers, callers), func(b *testing.B) {
			run(b, pgstore.Options{Writers: writers}, true)
		})
	}
}

func updateLoop(b *testing.B, s *pgstore.Store, id string, next func() bool) {
	recs, err := s.Apply(b.Context(), store.Op{Kind: "bench", ID: id, Data: []byte("0")})
	if err != nil {
		b.Error(err)
		return
	}
	v := recs[0].Version
	for next() {
		if _, err := s.Apply(b.Context(), store.Op{Kind: "bench", ID: id, ExpectVersion: v, Data: []byte(`{"stage":1}`)}); err != nil {
			b.Error(err)
			return
		}
		v++
	}
}
