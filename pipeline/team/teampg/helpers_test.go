package teampg_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
)

// envURL names the database the tests use; each test works in a schema of
// its own, dropped when it ends.
const envURL = "FOREMAN_TEST_POSTGRES"

func TestMain(m *testing.M) {
	if os.Getenv(envURL) == "" {
		if os.Getenv("CI") == "true" {
			fmt.Fprintln(os.Stderr, "teampg: CI=true but "+envURL+" is not set: the PostgreSQL tests must run in CI")
			os.Exit(1)
		}
		fmt.Println("teampg: " + envURL + " is not set, so the PostgreSQL tests skip; run them with " +
			"`.ci/with-postgres go test ./pipeline/team/teampg/` (as root on Debian) or set " + envURL + "=postgres://...")
	}
	os.Exit(m.Run())
}

// cluster is one team's database schema, shared repository and the
// scripted agent's fixture.
type cluster struct {
	*teamtest.Fixture
	pool   *pgxpool.Pool
	store  *pgstore.Store
	schema string
	remote string // the shared bare repository
}

func newCluster(t *testing.T) *cluster {
	t.Helper()
	url := os.Getenv(envURL)
	if url == "" {
		t.Skip(envURL + " is not set (see the first line of the package's output)")
	}
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	c := &cluster{Fixture: teamtest.New(t, "Teampg Test"), schema: "teampg_test_" + hex.EncodeToString(b[:])}
	c.remote = filepath.Join(t.TempDir(), "shared.git")
	teamtest.Git(t, filepath.Dir(c.remote), c.Env, "clone", "-q", "--bare", c.Repo, c.remote)
	cfg, err := pgxpool.ParseConfig(url)
	require.NoError(t, err)
	cfg.MaxConns = 16
	c.pool, err = pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() {
		_, _ = c.pool.Exec(context.Background(), "DROP SCHEMA IF EXISTS "+pgx.Identifier{c.schema}.Sanitize()+" CASCADE")
		c.pool.Close()
	})
	c.store, err = pgstore.OpenPool(ctx, c.pool, pgstore.Options{Schema: c.schema})
	require.NoError(t, err)
	t.Cleanup(func() { _ = c.store.Close() })
	return c
}

// clone opens a host's clone of the shared repository.
func (c *cluster) clone(t *testing.T, name string) *gitremote.Clone {
	t.Helper()
	cl, err := gitremote.Open(context.Background(), gitremote.Config{Remote: c.remote,
		Dir: filepath.Join(t.TempDir(), name), Merge: c.Config.Merge})
	require.NoError(t, err)
	return cl
}

// lease is a short lease, so that tests that give the lead up or take it
// over do not wait long.
func lease(holder string) pgstore.LeaseOptions {
	return pgstore.LeaseOptions{Holder: holder, TTL: 3 * time.Second}
}

// merged returns the shared main's Foreman-Item trailers, oldest first.
func (c *cluster) merged(t *testing.T) []string {
	t.Helper()
	out := teamtest.Git(t, c.remote, c.Env, "log", "--reverse", "--format=%(trailers:key=Foreman-Item,valueonly,separator=%x2C)", "main")
	return strings.Fields(out)
}

// newRole creates a login role of its own, dropped when the test ends, and
// returns a pool that logs in as it. grant makes it a worker host's role
// (GrantWorker) first.
func (c *cluster) newRole(t *testing.T, grant bool) (*pgxpool.Pool, string) {
	t.Helper()
	ctx := context.Background()
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password := "teampg_w_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"-pw"
	_, err := c.pool.Exec(ctx, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+password+"'")
	require.NoError(t, err)
	t.Cleanup(func() {
		for _, q := range []string{"DROP OWNED BY ", "DROP ROLE "} {
			if _, err := c.pool.Exec(context.Background(), q+pgx.Identifier{role}.Sanitize()); err != nil {
				t.Errorf("%s%s: %v", q, role, err)
			}
		}
	})
	if grant {
		require.NoError(t, teampg.GrantWorker(ctx, c.pool, c.schema, role))
	}
	cfg, err := pgxpool.ParseConfig(os.Getenv(envURL))
	require.NoError(t, err)
	cfg.ConnConfig.User, cfg.ConnConfig.Password, cfg.MaxConns = role, password, 8
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	return pool, role
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644))
}

func gitLog(t *testing.T, c *cluster, ref string) string {
	t.Helper()
	return teamtest.Git(t, c.remote, c.Env, "log", "-1", "--format=%B", ref)
}
