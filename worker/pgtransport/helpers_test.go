package pgtransport_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// envURL names the database the tests use; each test works in a schema of
// its own, dropped when the tests end.
const envURL = "FOREMAN_TEST_POSTGRES"

const skipLine = "pgtransport: " + envURL + " is not set, so the PostgreSQL tests skip; " +
	"run them with `.ci/with-postgres go test ./worker/pgtransport/` (as root on Debian) or set " + envURL + "=postgres://..."

// hostProcessEnv makes the test binary a worker host process (see
// TestMain and runHostProcess).
const hostProcessEnv = "PGTRANSPORT_TEST_HOST_PROCESS"

var schemas struct {
	mu  sync.Mutex
	all []string
}

func TestMain(m *testing.M) {
	if os.Getenv(hostProcessEnv) != "" {
		os.Exit(runHostProcess())
	}
	if os.Getenv(envURL) == "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "pgtransport: CI=true but "+envURL+" is not set: the PostgreSQL tests must run in CI")
			os.Exit(1)
		}
		fmt.Println(skipLine)
	}
	code := m.Run()
	if err := dropSchemas(); err != nil {
		fmt.Fprintln(os.Stderr, "pgtransport tests: dropping schemas:", err)
		code = 1
	}
	os.Exit(code)
}

func dropSchemas() error {
	schemas.mu.Lock()
	defer schemas.mu.Unlock()
	if len(schemas.all) == 0 {
		return nil
	}
	pool, err := pgxpool.New(context.Background(), os.Getenv(envURL))
	if err != nil {
		return err
	}
	defer pool.Close()
	for _, s := range schemas.all {
		if _, err := pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{s}.Sanitize()+" CASCADE"); err != nil {
			return err
		}
	}
	return nil
}

// env is a database schema holding a store and the transport's tables.
type env struct {
	url    string
	pool   *pgxpool.Pool
	store  *pgstore.Store
	schema string
}

func newEnv(t testing.TB) *env {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skip(skipLine)
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	schema := "pgtransport_test_" + hex.EncodeToString(b[:])
	schemas.mu.Lock()
	schemas.all = append(schemas.all, schema)
	schemas.mu.Unlock()
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 16
	pool, err := pgxpool.NewWithConfig(context.Background(), cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	st, err := pgstore.OpenPool(context.Background(), pool, pgstore.Options{Schema: schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = st.Close() })
	return &env{url: url, pool: pool, store: st, schema: schema}
}

func (e *env) lead(t testing.TB, holder string) *pgstore.Leader {
	t.Helper()
	l, err := e.store.TryLead(context.Background(), pgstore.LeaseOptions{Holder: holder, TTL: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = l.Resign(context.Background()) })
	return l
}

func (e *env) coordinator(t testing.TB, cfg pgtransport.Config, inbox worker.Inbox) *pgtransport.Coordinator {
	t.Helper()
	cfg.Pool, cfg.Store = e.pool, e.store
	c, err := pgtransport.NewCoordinator(context.Background(), cfg)
	require.NoError(t, err)
	if inbox != nil {
		c.Start(inbox)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// host starts a worker host in this process; it stops when the test ends.
func (e *env) host(t testing.TB, cfg pgtransport.HostConfig) *pgtransport.Host {
	t.Helper()
	if cfg.Pool == nil {
		cfg.Pool = e.pool
	}
	cfg.Schema = e.schema
	if cfg.Runtime.Commits == nil {
		cfg.Runtime.Commits = worker.NoCommits
	}
	h, err := pgtransport.NewHost(context.Background(), cfg)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- h.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil && err != context.Canceled {
			t.Errorf("host %s: %v", h.Name(), err)
		}
	})
	return h
}

// workerRole creates a login role of its own (dropped when the test ends),
// grants it a worker host's functions (GrantWorker) and returns a pool
// that logs in as it.
func (e *env) workerRole(t testing.TB) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password := "pgtransport_w_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"-pw"
	_, err := e.pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+password+"'")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, q := range []string{"DROP OWNED BY ", "DROP ROLE "} {
			if _, err := e.pool.Exec(context.Background(), q+pgx.Identifier{role}.Sanitize()); err != nil {
				t.Errorf("%s%s: %v", q, role, err)
			}
		}
	})
	require.NoError(t, pgtransport.GrantWorker(ctx, e.pool, e.schema, role))
	cfg, err := pgxpool.ParseConfig(e.url)
	require.NoError(t, err)
	cfg.ConnConfig.User, cfg.ConnConfig.Password, cfg.MaxConns = role, password, 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, role
}
