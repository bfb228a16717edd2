package sqlitestore_test

import (
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// BenchmarkApply measures durable transitions: one record updated per Apply
// (one commit, one fsync per transition) against 100 records updated per
// Apply, on SQLite and, as the baseline of the same run, on Memory. Compare
// the updates/s metrics between sub-benchmarks of one run.
func BenchmarkApply(b *testing.B) {
	stores := []struct {
		name string
		open func(b *testing.B) store.Store
	}{
		{"sqlite", func(b *testing.B) store.Store {
			s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{})
			require.NoError(b, err)
			return s
		}},
		{"memory", func(*testing.B) store.Store { return store.NewMemory(store.MemoryOptions{}) }},
	}
	// The floor for one commit per transition: append a line to a file and
	// fsync it, as a WAL commit must at least do.
	b.Run("baseline/append+fsync", func(b *testing.B) {
		f, err := os.Create(filepath.Join(b.TempDir(), "fsync"))
		require.NoError(b, err)
		defer f.Close()
		line := []byte(`{"id":"story-042","stage":2}` + "\n")
		for b.Loop() {
			if _, err := f.Write(line); err != nil {
				b.Fatal(err)
			}
			if err := f.Sync(); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "syncs/s")
	})
	for _, batch := range []int{1, 100} {
		b.Run(fmt.Sprintf("baseline/raw-sqlite/ops-per-tx=%d", batch), func(b *testing.B) {
			benchmarkRawSQLite(b, batch)
		})
	}
	for _, st := range stores {
		for _, batch := range []int{1, 100} {
			b.Run(fmt.Sprintf("%s/ops-per-apply=%d", st.name, batch), func(b *testing.B) {
				s := st.open(b)
				defer s.Close()
				benchmarkUpdates(b, s, batch)
			})
		}
	}
}

// BenchmarkGroupCommit measures group commit: 64 callers at once, each
// updating a record of its own one Apply at a time, so that Applies share
// commits (applies/commit says how many). Compare applies/s with
// BenchmarkApply's sqlite/ops-per-apply=1 (one caller, one commit each) in
// the same run.
func BenchmarkGroupCommit(b *testing.B) {
	const callers = 64
	s, err := sqlitestore.Open(b.Context(), filepath.Join(b.TempDir(), "bench.db"), sqlitestore.Options{})
	require.NoError(b, err)
	defer s.Close()
	data := []byte(`{"id":"story-042","stage":2,"assignment":"a-000123","attempts":{"s1":1,"s2":1},"pending":["spawn"],"startedAt":"2026-11-03T09:30:00Z"}`)
	var next atomic.Int64
	before := s.WriteStats()
	b.SetParallelism((callers + 1) / 2) // × GOMAXPROCS (2 here) goroutines
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		id := fmt.Sprint("caller-", next.Add(1))
		version := int64(0)
		for pb.Next() {
			recs, err := s.Apply(b.Context(), store.Op{Kind: "item", ID: id, ExpectVersion: version, Data: data})
			if err != nil {
				b.Error(err)
				return
			}
			version = recs[0].Version
		}
	})
	after := s.WriteStats()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "applies/s")
	b.ReportMetric(float64(after.Applies-before.Applies)/float64(max(after.Commits-before.Commits, 1)), "applies/commit")
}

// benchmarkUpdates rewrites the same batch of records, each time at its
// next version, with a document the size of an item's state.
func benchmarkUpdates(b *testing.B, s store.Store, batch int) {
	ctx := b.Context()
	data := []byte(`{"id":"story-042","stage":2,"assignment":"a-000123","attempts":{"s1":1,"s2":1},"pending":["spawn"],"startedAt":"2026-11-03T09:30:00Z"}`)
	ops := make([]store.Op, batch)
	for i := range ops {
		ops[i] = store.Op{Kind: "item", ID: fmt.Sprintf("story-%04d", i), Data: data}
	}
	_, err := s.Apply(ctx, ops...)
	require.NoError(b, err)
	for i := range ops {
		ops[i].ExpectVersion = 1
	}
	b.ReportAllocs()
	b.ResetTimer()
	applies := 0
	for b.Loop() {
		if _, err := s.Apply(ctx, ops...); err != nil {
			b.Fatal(err)
		}
		for i := range ops {
			ops[i].ExpectVersion++
		}
		applies++
	}
	secs := b.Elapsed().Seconds()
	b.ReportMetric(float64(applies)/secs, "tx/s")
	b.ReportMetric(float64(applies*batch)/secs, "updates/s")
}

// benchmarkRawSQLite is the same work as benchmarkUpdates on SQLite, straight
// through database/sql with the store's DSN and schema: what the store adds
// on top of the driver is the difference.
func benchmarkRawSQLite(b *testing.B, batch int) {
	path := filepath.Join(b.TempDir(), "raw.db")
	s, err := sqlitestore.Open(b.Context(), path, sqlitestore.Options{})
	require.NoError(b, err)
	data := []byte(`{"id":"story-042","stage":2,"assignment":"a-000123","attempts":{"s1":1,"s2":1},"pending":["spawn"],"startedAt":"2026-11-03T09:30:00Z"}`)
	ops := make([]store.Op, batch)
	for i := range ops {
		ops[i] = store.Op{Kind: "item", ID: fmt.Sprintf("story-%04d", i), Data: data}
	}
	_, err = s.Apply(b.Context(), ops...)
	require.NoError(b, err)
	require.NoError(b, s.Close())

	db, err := sql.Open("sqlite", sqlitestore.DSN(path, 5*time.Second, false))
	require.NoError(b, err)
	defer db.Close()
	db.SetMaxOpenConns(1)
	update, err := db.Prepare(`UPDATE records SET version = version + 1, data = ?, updated_at = ? WHERE kind = ? AND id = ? AND version = ?`)
	require.NoError(b, err)
	defer update.Close()
	version := int64(1)
	for b.Loop() {
		tx, err := db.Begin()
		if err != nil {
			b.Fatal(err)
		}
		st := tx.Stmt(update)
		for _, op := range ops {
			if _, err := st.Exec(data, int64(version), op.Kind, op.ID, version); err != nil {
				b.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
		version++
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tx/s")
	b.ReportMetric(float64(b.N*batch)/b.Elapsed().Seconds(), "updates/s")
}
