package pgstore_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

func schemaVersion(t *testing.T, schema string) int {
	t.Helper()
	var v int
	require.NoError(t, sharedPool(t).QueryRow(t.Context(),
		`SELECT version FROM `+pgx.Identifier{schema}.Sanitize()+`.foreman_schema`).Scan(&v))
	return v
}

// Open migrates a schema left at any earlier version, keeping its records,
// versions and tombstones.
func TestMigratesFromEveryEarlierVersion(t *testing.T) {
	for from := 0; from < pgstore.SchemaVersion; from++ {
		t.Run(fmt.Sprint("from version ", from), func(t *testing.T) {
			schema := newSchema(t)
			q := pgx.Identifier{schema}.Sanitize()
			if from > 0 {
				require.NoError(t, pgstore.MigrateTo(t.Context(), sharedPool(t), schema, from))
				assert.Equal(t, from, schemaVersion(t, schema))
				rawExec(t, `INSERT INTO `+q+`.records VALUES ('item', 'a', 4, 'kept', now())`)
				rawExec(t, `INSERT INTO `+q+`.tombstones VALUES ('item', 'gone', 7, now())`)
			}
			s := openStore(t, pgstore.Options{Schema: schema})
			assert.Equal(t, pgstore.SchemaVersion, schemaVersion(t, schema))

			if from > 0 {
				got, err := s.Get(t.Context(), "item", "a")
				require.NoError(t, err)
				assert.Equal(t, int64(4), got.Version)
				assert.Equal(t, "kept", string(got.Data))
				recs, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "gone", Data: []byte("back")})
				require.NoError(t, err)
				assert.Equal(t, int64(8), recs[0].Version, "the tombstone written before the migration still counts")
			}
			_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "new"})
			require.NoError(t, err)
			l, err := s.TryLead(t.Context(), pgstore.LeaseOptions{Clock: foreman.NewFakeClock(leaseStart)})
			require.NoError(t, err, "leases exist after the migration")
			require.NoError(t, l.Resign(t.Context()))
		})
	}
}

func TestNewerSchemaIsRefusedUntouched(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, pgstore.Options{Schema: schema})
	_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("kept")})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rawExec(t, `UPDATE `+pgx.Identifier{schema}.Sanitize()+`.foreman_schema SET version = 99`)

	_, err = pgstore.OpenPool(t.Context(), sharedPool(t), pgstore.Options{Schema: schema})
	require.ErrorIs(t, err, pgstore.ErrSchemaVersion)
	var sv *pgstore.SchemaVersionError
	require.ErrorAs(t, err, &sv)
	assert.Equal(t, pgstore.SchemaVersionError{Schema: schema, Found: 99, Supported: pgstore.SchemaVersion}, *sv)
	assert.Contains(t, err.Error(), "upgrade Foreman")
	assert.Equal(t, 99, schemaVersion(t, schema))
	var data []byte
	require.NoError(t, sharedPool(t).QueryRow(t.Context(), `SELECT data FROM `+pgx.Identifier{schema}.Sanitize()+`.records`).Scan(&data))
	assert.Equal(t, "kept", string(data))
}

func TestForeignSchemaIsRefused(t *testing.T) {
	schema := newSchema(t)
	q := pgx.Identifier{schema}.Sanitize()
	rawExec(t, `CREATE SCHEMA `+q+`; CREATE TABLE `+q+`.invoices (n int)`)
	_, err := pgstore.OpenPool(t.Context(), sharedPool(t), pgstore.Options{Schema: schema})
	require.ErrorIs(t, err, pgstore.ErrForeignSchema)
	var tables int
	require.NoError(t, sharedPool(t).QueryRow(t.Context(),
		`SELECT count(*) FROM pg_tables WHERE schemaname = $1`, schema).Scan(&tables))
	assert.Equal(t, 1, tables, "nothing was created in a foreign schema")
}

// Coordinators starting at once on a new database: the schema is created
// once, under the migration lock, and they all work on it.
func TestConcurrentOpensCreateTheSchemaOnce(t *testing.T) {
	schema := newSchema(t)
	stores := make([]*pgstore.Store, 4)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			s, err := pgstore.OpenPool(t.Context(), sharedPool(t), pgstore.Options{Schema: schema})
			if assert.NoError(t, err) {
				stores[i] = s
				t.Cleanup(func() { _ = s.Close() })
			}
		})
	}
	wg.Wait()
	_, err := stores[0].Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("from 0")})
	require.NoError(t, err)
	_, err = stores[1].Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("from 1")})
	var ce *store.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, int64(1), ce.Actual)
	got, err := stores[3].Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, "from 0", string(got.Data))
}

// Open with its own pool: what it wrote is there after Close and a new
// Open, with UpdatedAt kept to PostgreSQL's microsecond.
func TestDurableAcrossReopen(t *testing.T) {
	schema := newSchema(t)
	at := time.Date(2026, 11, 3, 9, 30, 0, 123456789, time.UTC)
	s, err := pgstore.Open(t.Context(), databaseURL(t), pgstore.Options{Schema: schema, Clock: foreman.NewFakeClock(at)})
	require.NoError(t, err)
	recs, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte(`{"stage":2}`)}, store.Op{Kind: "item", ID: "b"})
	require.NoError(t, err)
	want := time.Date(2026, 11, 3, 9, 30, 0, 123456000, time.UTC)
	assert.Equal(t, want, recs[0].UpdatedAt)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "b", ExpectVersion: 1, Delete: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	require.NoError(t, s.Close())

	s, err = pgstore.Open(t.Context(), databaseURL(t), pgstore.Options{Schema: schema})
	require.NoError(t, err)
	defer s.Close()
	got, err := s.Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, store.Record{Kind: "item", ID: "a", Version: 1, Data: []byte(`{"stage":2}`), UpdatedAt: want}, got)
	recs, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "b"})
	require.NoError(t, err)
	assert.Equal(t, int64(2), recs[0].Version, "the tombstone survived the reopen")
}

// PostgreSQL's text holds neither NUL nor invalid UTF-8: such kinds and ids
// are refused up front like any other malformed op, and cannot be found.
func TestTextPostgreSQLCannotHoldIsAnInvalidOp(t *testing.T) {
	s := openStore(t, pgstore.Options{})
	for _, op := range []store.Op{
		{Kind: "item", ID: "nul\x00byte"},
		{Kind: "\xff\xfe", ID: "a"},
	} {
		recs, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "valid"}, op)
		assert.ErrorIs(t, err, store.ErrInvalidOp)
		assert.Nil(t, recs)
		_, err = s.Get(t.Context(), op.Kind, op.ID)
		assert.ErrorIs(t, err, store.ErrNotFound)
	}
	list, err := s.List(t.Context(), "\xff")
	require.NoError(t, err)
	assert.Empty(t, list)
	_, err = s.Get(t.Context(), "item", "valid")
	assert.ErrorIs(t, err, store.ErrNotFound, "nothing of a refused Apply was written")
}

func TestBadOptionsAndUnreachableDatabase(t *testing.T) {
	ctx := context.Background()
	for _, o := range []pgstore.Options{{MaxBatch: -1}, {Writers: -1}, {WriteTimeout: -time.Second}, {Schema: "a\x00b"}} {
		_, err := pgstore.Open(ctx, "postgres://127.0.0.1:1/none", o)
		assert.ErrorIs(t, err, pgstore.ErrInvalidOptions, "%+v", o)
	}
	_, err := pgstore.OpenPool(ctx, nil, pgstore.Options{})
	assert.ErrorIs(t, err, pgstore.ErrInvalidOptions)
	_, err = pgstore.Open(ctx, "this is not a url=", pgstore.Options{})
	assert.Error(t, err)
	_, err = pgstore.Open(ctx, "postgres://127.0.0.1:1/none?connect_timeout=5", pgstore.Options{})
	assert.ErrorContains(t, err, "pgstore")
}
