package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
)

// envURL names the database the tests use. Each test works in a schema of
// its own, dropped at its end, so any throwaway database will do.
const envURL = "FOREMAN_TEST_POSTGRES"

const skipLine = "pgstore: " + envURL + " is not set, so the PostgreSQL tests skip; " +
	"run them with `.ci/with-postgres go test ./pipeline/pgstore/` (as root on Debian: installs and starts a throwaway server) " +
	"or set " + envURL + "=postgres://user@host:port/db?sslmode=disable"

func TestMain(m *testing.M) {
	if os.Getenv(envURL) == "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "pgstore: CI=true but "+envURL+" is not set: the PostgreSQL tests must run in CI (.ci/run starts a server)")
			os.Exit(1)
		}
		fmt.Println(skipLine)
	}
	code := m.Run()
	reused.closePool()
	if err := reused.dropAll(); err != nil {
		fmt.Fprintln(os.Stderr, "pgstore tests: dropping schemas:", err)
		code = 1
	}
	os.Exit(code)
}

// reused hands out migrated schemas emptied by the test that used them
// before: creating and dropping a schema costs PostgreSQL a few hundred
// milliseconds of catalog work, emptying one a millisecond.
var reused schemaPool

type schemaPool struct {
	mu   sync.Mutex
	url  string
	free []string
	all  []string
	pool *pgxpool.Pool
}

// sharedPool is one connection pool for the tests' stores: connecting
// costs PostgreSQL a process and its caches (tens of milliseconds on a
// busy machine), which a pool per test would pay again and again.
func sharedPool(t testing.TB) *pgxpool.Pool {
	t.Helper()
	url := databaseURL(t)
	p := &reused
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool == nil {
		pool, err := pgxpool.New(context.Background(), url)
		require.NoError(t, err)
		p.pool = pool
	}
	return p.pool
}

func (p *schemaPool) closePool() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.pool != nil {
		p.pool.Close()
	}
}

// emptySchema returns a schema holding no records, tombstones or leases;
// Open on it may find it already migrated. It is emptied and handed out
// again once the test's stores are closed.
func emptySchema(t testing.TB) string {
	t.Helper()
	url := databaseURL(t)
	p := &reused
	p.mu.Lock()
	var schema string
	if n := len(p.free); n > 0 {
		schema, p.free = p.free[n-1], p.free[:n-1]
	} else {
		schema = randomSchemaName()
		p.all = append(p.all, schema)
		p.url = url
	}
	p.mu.Unlock()
	t.Cleanup(func() {
		q := pgx.Identifier{schema}.Sanitize()
		// The schema may not exist yet if the test failed before Open.
		_, err := sharedPool(t).Exec(context.Background(), `DO $$ BEGIN
			IF to_regclass('`+q+`.leases') IS NOT NULL THEN
				DELETE FROM `+q+`.records; DELETE FROM `+q+`.tombstones; DELETE FROM `+q+`.leases;
			END IF; END $$`)
		if err != nil {
			t.Errorf("empty schema %s: %v", schema, err)
			return
		}
		p.mu.Lock()
		p.free = append(p.free, schema)
		p.mu.Unlock()
	})
	return schema
}

func (p *schemaPool) dropAll() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.all) == 0 {
		return nil
	}
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, p.url)
	if err != nil {
		return err
	}
	defer conn.Close(ctx)
	for _, schema := range p.all {
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			return err
		}
	}
	return nil
}

func randomSchemaName() string {
	var b [6]byte
	_, _ = rand.Read(b[:])
	return "foreman_test_" + hex.EncodeToString(b[:])
}

// databaseURL returns the test database's URL, or skips the test.
func databaseURL(t testing.TB) string {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skip(envURL + " is not set (see the first line of the package's output)")
	}
	return url
}

// newSchema returns the name of a schema no other test uses, dropped when
// the test ends (after the stores it opened are closed, since cleanups run
// last-in first-out).
func newSchema(t testing.TB) string {
	t.Helper()
	url := databaseURL(t)
	schema := randomSchemaName()
	t.Cleanup(func() {
		ctx := context.Background()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA IF EXISTS "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return schema
}

// openStore opens a store on the shared pool, in an empty schema (or the
// given one).
func openStore(t testing.TB, opts pgstore.Options) *pgstore.Store {
	t.Helper()
	if opts.Schema == "" {
		opts.Schema = emptySchema(t)
	}
	s, err := pgstore.OpenPool(t.Context(), sharedPool(t), opts)
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// rawExec changes the database behind the store's back.
func rawExec(t testing.TB, query string, args ...any) {
	t.Helper()
	ctx := context.Background()
	conn, err := pgx.Connect(ctx, databaseURL(t))
	require.NoError(t, err)
	defer conn.Close(ctx)
	_, err = conn.Exec(ctx, query, args...)
	require.NoError(t, err)
}
