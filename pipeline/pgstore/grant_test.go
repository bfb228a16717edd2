package pgstore_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline/pgstore"
)

// A role given GrantOpen opens the store and reads its version, and can do
// nothing else with it: its records and leases are out of reach, and
// CheckRestricted finds nothing more. The owner's role is no restricted
// role, and says what it can do.
func TestGrantOpenLetsARoleOpenTheStoreAndNothingMore(t *testing.T) {
	ctx := context.Background()
	schema := newSchema(t)
	owner := sharedPool(t)
	var b [6]byte
	_, _ = rand.Read(b[:])
	role, password := "pgstore_r_"+hex.EncodeToString(b[:]), hex.EncodeToString(b[:])+"-pw"
	rawExec(t, "CREATE ROLE "+pgx.Identifier{role}.Sanitize()+" LOGIN PASSWORD '"+password+"'")
	t.Cleanup(func() {
		rawExec(t, "DROP OWNED BY "+pgx.Identifier{role}.Sanitize())
		rawExec(t, "DROP ROLE "+pgx.Identifier{role}.Sanitize())
	})
	require.NoError(t, pgstore.GrantOpen(ctx, owner, schema, role))
	require.NoError(t, pgstore.GrantOpen(ctx, owner, schema, role), "idempotent")

	cfg, err := pgxpool.ParseConfig(databaseURL(t))
	require.NoError(t, err)
	cfg.ConnConfig.User, cfg.ConnConfig.Password = role, password
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	require.NoError(t, err)
	defer pool.Close()
	st, err := pgstore.OpenPool(ctx, pool, pgstore.Options{Schema: schema})
	require.NoError(t, err, "the role opens the store")
	defer st.Close()
	_, err = st.Get(ctx, "k", "x")
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, "reading a record")
	assert.Equal(t, "42501", pe.Code)
	_, err = st.TryLead(ctx, pgstore.LeaseOptions{Holder: "r"})
	require.ErrorAs(t, err, &pe, "taking the lease")
	assert.Equal(t, "42501", pe.Code)
	assert.NoError(t, pgstore.CheckRestricted(ctx, owner, schema, role))
	assert.NoError(t, pgstore.CheckRestricted(ctx, pool, schema, ""), "its own role, checked from inside")

	var me string
	require.NoError(t, owner.QueryRow(ctx, `SELECT current_user`).Scan(&me))
	err = pgstore.CheckRestricted(ctx, owner, schema, me)
	var priv *pgstore.PrivilegeError
	require.ErrorAs(t, err, &priv)
	assert.ErrorIs(t, err, pgstore.ErrPrivileged)
	for _, want := range []string{"CREATE on the schema", "INSERT on records", "UPDATE on leases", "TRUNCATE on tombstones"} {
		assert.Contains(t, priv.Held, want)
	}
	assert.NotContains(t, priv.Held, "SELECT on foreman_schema", "the version table is readable by design")

	assert.ErrorIs(t, pgstore.GrantOpen(ctx, owner, schema, "no_such_role_here"), pgstore.ErrNoRole)
	for _, bad := range []string{"", strings.Repeat("r", 64), "a\x00b"} {
		assert.ErrorIs(t, pgstore.GrantOpen(ctx, owner, schema, bad), pgstore.ErrInvalidOptions, "%q", bad)
	}
	assert.ErrorIs(t, pgstore.GrantOpen(ctx, owner, "Bad-Schema", role), pgstore.ErrInvalidSchemaName)
}
