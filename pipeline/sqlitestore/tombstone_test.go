package sqlitestore_test

import (
	"database/sql"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// schema1 is the database a build with SchemaVersion 1 wrote, spelled out
// here rather than taken from the package, so that the test keeps checking
// the upgrade of real old files whatever later migrations do.
var schema1 = []string{
	`CREATE TABLE foreman_schema (
		id      INTEGER PRIMARY KEY CHECK (id = 1),
		version INTEGER NOT NULL
	)`,
	`INSERT INTO foreman_schema (id, version) VALUES (1, 1)`,
	`CREATE TABLE records (
		kind       TEXT    NOT NULL,
		id         TEXT    NOT NULL,
		version    INTEGER NOT NULL CHECK (version >= 1),
		data       BLOB    NOT NULL,
		updated_at INTEGER NOT NULL,
		PRIMARY KEY (kind, id)
	)`,
}

func TestMigrationFromSchema1KeepsRecordsAndVersions(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	for _, q := range schema1 {
		rawExec(t, path, q)
	}
	at := time.Date(2026, 11, 3, 9, 30, 0, 123456789, time.UTC)
	old := []store.Record{
		{Kind: "item", ID: "a", Version: 3, Data: []byte(`{"stage":2}`), UpdatedAt: at},
		{Kind: "item", ID: "b", Version: 1, Data: []byte{}, UpdatedAt: at.Add(time.Second)},
		{Kind: "task", ID: "t", Version: 7, Data: []byte{0, 0xff}, UpdatedAt: at.Add(2 * time.Second)},
	}
	for _, r := range old {
		rawExec(t, path, `INSERT INTO records (kind, id, version, data, updated_at) VALUES (?, ?, ?, ?, ?)`,
			r.Kind, r.ID, r.Version, r.Data, r.UpdatedAt.UnixNano())
	}

	_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{ReadOnly: true})
	var sv *sqlitestore.SchemaVersionError
	require.ErrorAs(t, err, &sv, "a reader does not migrate")
	assert.Equal(t, sqlitestore.SchemaVersionError{Path: path, Found: 1, Supported: sqlitestore.SchemaVersion}, *sv)
	assert.Equal(t, 1, rawSchemaVersion(t, path))

	s := openStore(t, path, sqlitestore.Options{Clock: clock.NewFake(at.Add(time.Hour))})
	assert.Equal(t, 2, rawSchemaVersion(t, path))
	for _, want := range old {
		got, err := s.Get(t.Context(), want.Kind, want.ID)
		require.NoError(t, err)
		assert.Equal(t, want, got)
	}
	items, err := s.List(t.Context(), "item")
	require.NoError(t, err)
	assert.Equal(t, old[:2], items)

	// The versions carry on, and the migrated file keeps tombstones.
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 3, Data: []byte("a4")})
	require.NoError(t, err)
	_, err = s.Apply(t.Context(),
		store.Op{Kind: "item", ID: "a", ExpectVersion: 4, Delete: true},
		store.Op{Kind: "task", ID: "t", ExpectVersion: 7, Delete: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openStore(t, path, sqlitestore.Options{})
	assert.Equal(t, 2, rawSchemaVersion(t, path), "a second open migrates nothing")
	recs, err := s.Apply(t.Context(),
		store.Op{Kind: "item", ID: "a", Data: []byte("a5")},
		store.Op{Kind: "task", ID: "t", Data: []byte("t8")})
	require.NoError(t, err, "tombstones survive a reopen")
	assert.Equal(t, int64(5), recs[0].Version)
	assert.Equal(t, int64(8), recs[1].Version)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 4, Data: []byte("stale")})
	requireConflictActual(t, err, 5)
}

// A deleted record leaves records, so that nothing reading or counting that
// table (List, Get, a person with the sqlite3 shell) sees it; its one row
// in tombstones goes when the record is created again.
func TestTombstonesStayOutOfRecords(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	deletedAt := time.Date(2026, 11, 3, 9, 30, 0, 0, time.UTC)
	s := openStore(t, path, sqlitestore.Options{Clock: clock.NewFake(deletedAt)})
	_, err := s.Apply(t.Context(),
		store.Op{Kind: "item", ID: "a", Data: []byte("a1")},
		store.Op{Kind: "item", ID: "b", Data: []byte("b1")})
	require.NoError(t, err)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Data: []byte("a2")})
	require.NoError(t, err)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 2, Delete: true})
	require.NoError(t, err)

	db := rawDB(t, path)
	var live, buried int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM records`).Scan(&live))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM tombstones`).Scan(&buried))
	assert.Equal(t, 1, live)
	assert.Equal(t, 1, buried)
	var kind, id string
	var version, nanos int64
	require.NoError(t, db.QueryRow(`SELECT kind, id, version, deleted_at FROM tombstones`).Scan(&kind, &id, &version, &nanos))
	assert.Equal(t, []any{"item", "a", int64(2), deletedAt.UnixNano()}, []any{kind, id, version, nanos})

	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("a3")})
	require.NoError(t, err)
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM records`).Scan(&live))
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM tombstones`).Scan(&buried))
	assert.Equal(t, 2, live)
	assert.Zero(t, buried, "a create spends the tombstone")
}

func TestPurgeTombstonesOnAReadOnlyStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	openStore(t, path, sqlitestore.Options{})
	r := openStore(t, path, sqlitestore.Options{ReadOnly: true})
	_, err := r.PurgeTombstones(t.Context(), time.Now())
	assert.ErrorIs(t, err, sqlitestore.ErrReadOnly)
}

func rawDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = db.Close() })
	return db
}

func rawSchemaVersion(t *testing.T, path string) int {
	t.Helper()
	var v int
	require.NoError(t, rawDB(t, path).QueryRow(`SELECT version FROM foreman_schema`).Scan(&v))
	return v
}
