package pgtransport

import (
	"context"
	"fmt"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/pipeline/pgstore"
)

// GrantWorker lets the database role serve as a worker host of schema's
// queues (NewHost with a pool that logs in as role) and nothing more. Run
// it as the role that owns the schema (the coordinators'); it creates or
// migrates the store's and the transport's tables first, is idempotent,
// and takes a lock so that coordinators starting together may all call it.
// schema "" is the default ("foreman"). The role must exist
// (pgstore.ErrNoRole).
//
// The role gets USAGE on the schema, SELECT on the two version tables
// (pgstore.GrantOpen), and EXECUTE on the host's SECURITY DEFINER
// functions: claim open assignments, write messages and heartbeats for
// assignments it claimed, and take the commands for them (wt_host_round
// does all four in one call). It gets no
// privilege on any table: it cannot read the queue, the messages or the
// store's records, write another role's claims, messages or commands,
// touch the leases, or create anything. A host calling a function for an
// assignment another role claimed is refused with SQLSTATE 42501; so is a
// message that names another assignment than the one it is written for.
//
// Hosts that share a role can act for each other's claims: give each
// machine a login role of its own (members of one group role granted
// here: the functions bind claims to the role a host logged in with,
// session_user) when hosts must be kept from each other.
//
// When role can still do more with the schema (a superuser, the owner or a
// member of its role, or grants made before), GrantWorker returns a
// *pgstore.PrivilegeError (pgstore.ErrPrivileged) naming what: revoke that
// and call it again.
func GrantWorker(ctx context.Context, pool *pgxpool.Pool, schema, role string) error {
	if pool == nil {
		return fmt.Errorf("%w: GrantWorker: nil pool", ErrInvalidConfig)
	}
	if err := pgstore.GrantOpen(ctx, pool, schema, role); err != nil {
		return err
	}
	st, err := pgstore.OpenPool(ctx, pool, pgstore.Options{Schema: schema})
	if err != nil {
		return err
	}
	schema = st.Schema()
	defer func() { _ = st.Close() }()
	if err := migrate(ctx, pool, st); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgtransport: grant: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, pgstore.GrantLockSQL, schema); err != nil {
		return fmt.Errorf("pgtransport: grant: %w", err)
	}
	r, s := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	stmt := `GRANT SELECT ON ` + s + `.` + schemaTable + ` TO ` + r
	for _, f := range hostFunctionSignatures() {
		stmt += `; GRANT EXECUTE ON FUNCTION ` + s + `.` + f + ` TO ` + r
	}
	if _, err := tx.Exec(ctx, stmt); err != nil {
		return fmt.Errorf("pgtransport: granting role %q a worker host's functions in schema %q: %w", role, schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgtransport: grant: %w", err)
	}
	return CheckWorker(ctx, pool, schema, role)
}

// CheckWorker returns a *pgstore.PrivilegeError (pgstore.ErrPrivileged)
// when role can do more with schema than GrantWorker grants: create in it,
// or use any of its tables or sequences directly beyond reading the
// version tables. role "" is the pool's own role: a worker host can check
// the role it was given, and warn when it is the coordinators' (a host
// that runs agents could then write the team's state and the leader's
// lease).
func CheckWorker(ctx context.Context, pool *pgxpool.Pool, schema, role string) error {
	return pgstore.CheckRestricted(ctx, pool, schema, role, schemaTable)
}
