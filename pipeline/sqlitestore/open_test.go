package sqlitestore_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

func openStore(t *testing.T, path string, opts sqlitestore.Options) *sqlitestore.Store {
	t.Helper()
	s, err := sqlitestore.Open(t.Context(), path, opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawExec changes a database behind the store's back.
func rawExec(t *testing.T, path, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	_, err = db.ExecContext(t.Context(), query, args...)
	require.NoError(t, err)
}

func TestDurableAcrossReopen(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	at := time.Date(2026, 11, 3, 9, 30, 0, 123456789, time.UTC)
	s := openStore(t, path, sqlitestore.Options{Clock: clock.NewFake(at)})
	_, err := s.Apply(t.Context(),
		store.Op{Kind: "item", ID: "a", Data: []byte(`{"stage":2}`)},
		store.Op{Kind: "item", ID: "b", Data: []byte("gone soon")})
	require.NoError(t, err)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "b", ExpectVersion: 1, Delete: true})
	require.NoError(t, err)
	require.NoError(t, s.Close())

	s = openStore(t, path, sqlitestore.Options{})
	got, err := s.Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, store.Record{Kind: "item", ID: "a", Version: 1, Data: []byte(`{"stage":2}`), UpdatedAt: at}, got)
	_, err = s.Get(t.Context(), "item", "b")
	assert.ErrorIs(t, err, store.ErrNotFound)
	_, err = s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Data: []byte(`{"stage":3}`)})
	assert.NoError(t, err, "the version carries over")
}

func TestNewerSchemaIsRefusedUntouched(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	s := openStore(t, path, sqlitestore.Options{})
	_, err := s.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("kept")})
	require.NoError(t, err)
	require.NoError(t, s.Close())
	rawExec(t, path, `UPDATE foreman_schema SET version = 99`)

	for _, readOnly := range []bool{false, true} {
		_, err = sqlitestore.Open(t.Context(), path, sqlitestore.Options{ReadOnly: readOnly})
		require.ErrorIs(t, err, sqlitestore.ErrSchemaVersion)
		var sv *sqlitestore.SchemaVersionError
		require.ErrorAs(t, err, &sv)
		assert.Equal(t, sqlitestore.SchemaVersionError{Path: path, Found: 99, Supported: sqlitestore.SchemaVersion}, *sv)
		assert.Contains(t, err.Error(), "upgrade Foreman")
	}

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var version int
	var data string
	require.NoError(t, db.QueryRow(`SELECT version FROM foreman_schema`).Scan(&version))
	require.NoError(t, db.QueryRow(`SELECT data FROM records WHERE id = 'a'`).Scan(&data))
	assert.Equal(t, 99, version)
	assert.Equal(t, "kept", data)
}

func TestForeignDatabaseIsRefused(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	rawExec(t, path, `CREATE TABLE invoices (n INTEGER)`)
	_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
	require.ErrorIs(t, err, sqlitestore.ErrForeignDatabase)

	db, err := sql.Open("sqlite", path)
	require.NoError(t, err)
	defer db.Close()
	var tables int
	require.NoError(t, db.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE type = 'table'`).Scan(&tables))
	assert.Equal(t, 1, tables, "nothing was created in a foreign database")
}

func TestCorruptFileIsReportedAndKept(t *testing.T) {
	t.Run("not a database", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		garbage := bytes.Repeat([]byte("this is not a SQLite file\n"), 400)
		require.NoError(t, os.WriteFile(path, garbage, 0o600))
		for _, readOnly := range []bool{false, true} {
			_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{ReadOnly: readOnly})
			require.ErrorIs(t, err, sqlitestore.ErrCorrupt)
			var ce *sqlitestore.CorruptError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, path, ce.Path)
			assert.Contains(t, err.Error(), "file kept")
		}
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, garbage, after, "the corrupt file is left as it was")
	})
	t.Run("damaged pages", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "state.db")
		s := openStore(t, path, sqlitestore.Options{})
		var ops []store.Op
		for i := range 300 {
			ops = append(ops, store.Op{Kind: "item", ID: fmt.Sprintf("item-%03d", i), Data: bytes.Repeat([]byte{'x'}, 1000)})
		}
		_, err := s.Apply(t.Context(), ops...)
		require.NoError(t, err)
		require.NoError(t, s.Close(), "the last close checkpoints the WAL into the file")

		f, err := os.OpenFile(path, os.O_RDWR, 0)
		require.NoError(t, err)
		_, err = f.WriteAt(bytes.Repeat([]byte{0xab}, 3*4096), 3*4096)
		require.NoError(t, err)
		require.NoError(t, f.Close())
		damaged, err := os.ReadFile(path)
		require.NoError(t, err)

		_, err = sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
		require.ErrorIs(t, err, sqlitestore.ErrCorrupt)
		after, err := os.ReadFile(path)
		require.NoError(t, err)
		assert.Equal(t, damaged, after, "the damaged file is left as it was")
	})
}

func TestReadOnly(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	_, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{ReadOnly: true})
	require.ErrorIs(t, err, os.ErrNotExist, "a reader does not create the database")
	_, statErr := os.Stat(path)
	assert.ErrorIs(t, statErr, os.ErrNotExist)

	w := openStore(t, path, sqlitestore.Options{})
	r := openStore(t, path, sqlitestore.Options{ReadOnly: true})
	_, err = w.Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("a1")})
	require.NoError(t, err)
	got, err := r.Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, "a1", string(got.Data))

	_, err = r.Apply(t.Context(), store.Op{Kind: "item", ID: "b", Data: []byte("b1")})
	assert.ErrorIs(t, err, sqlitestore.ErrReadOnly)
	_, err = w.Get(t.Context(), "item", "b")
	assert.ErrorIs(t, err, store.ErrNotFound)

	// With no writer running (its close removed the WAL), a reader still
	// opens the file.
	require.NoError(t, w.Close())
	require.NoError(t, r.Close())
	r = openStore(t, path, sqlitestore.Options{ReadOnly: true})
	got, err = r.Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, "a1", string(got.Data))
}

// Two stores opening one new file at once: the schema is created once and
// both work, the second writer waiting for the first one's lock.
func TestTwoWritersOnOneFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	stores := make([]*sqlitestore.Store, 2)
	var wg sync.WaitGroup
	for i := range stores {
		wg.Go(func() {
			s, err := sqlitestore.Open(t.Context(), path, sqlitestore.Options{})
			if assert.NoError(t, err) {
				stores[i] = s
			}
		})
	}
	wg.Wait()
	for _, s := range stores {
		require.NotNil(t, s)
		t.Cleanup(func() { _ = s.Close() })
	}
	_, err := stores[0].Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("from 0")})
	require.NoError(t, err)
	_, err = stores[1].Apply(t.Context(), store.Op{Kind: "item", ID: "a", Data: []byte("from 1")})
	requireConflictActual(t, err, 1)
	_, err = stores[1].Apply(t.Context(), store.Op{Kind: "item", ID: "a", ExpectVersion: 1, Data: []byte("from 1")})
	require.NoError(t, err)
	got, err := stores[0].Get(t.Context(), "item", "a")
	require.NoError(t, err)
	assert.Equal(t, "from 1", string(got.Data))
}

func requireConflictActual(t *testing.T, err error, actual int64) {
	t.Helper()
	var ce *store.ConflictError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, actual, ce.Actual)
}
