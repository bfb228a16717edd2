package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// Restricted roles. A process that must not be trusted with the store (a
// worker host, which runs agents) connects with a database role of its
// own that can open the store and nothing more: GrantOpen gives it that,
// the packages built on the store (worker/pgtransport,
// pipeline/team/teampg) grant it the few SECURITY DEFINER functions it
// calls, and CheckRestricted verifies that it can do nothing else with
// the schema's tables: a role that can write them directly could write
// anything (the records, the leader's lease), whatever the functions
// check.

// ErrNoRole: the role named does not exist (create it first: CREATE ROLE
// name LOGIN PASSWORD '...').
var ErrNoRole = errors.New("pgstore: no such role")

// ErrPrivileged matches a *PrivilegeError.
var ErrPrivileged = errors.New("pgstore: the role can do more with the schema than a restricted role may")

// PrivilegeError lists what a role meant to be restricted can still do
// with the schema: create objects in it, or use its tables and sequences
// directly (as their owner, a superuser, a member of the owner's role, or
// through grants).
type PrivilegeError struct {
	Schema string
	Role   string
	// Held names each privilege, as "INSERT on records" or "CREATE on
	// the schema".
	Held []string
}

func (e *PrivilegeError) Error() string {
	return fmt.Sprintf("pgstore: role %q can do more with schema %q than a restricted role may (%s): give the restricted processes a role of their own, "+
		"neither a superuser nor a member of the role that owns the schema, and revoke these", e.Role, e.Schema, strings.Join(e.Held, ", "))
}

// Is makes errors.Is(err, ErrPrivileged) true.
func (e *PrivilegeError) Is(target error) bool { return target == ErrPrivileged }

// GrantLockSQL is the transaction-scoped advisory lock under which grants
// on a schema are made ($1 is the schema): GRANTs of one object by two
// processes at once can fail ("tuple concurrently updated"), so every
// package that grants on the schema takes it.
const GrantLockSQL = `SELECT pg_advisory_xact_lock(hashtext('foreman-grant:' || $1))`

// GrantOpen lets role open the store in schema (Open, OpenPool) without
// writing anything: USAGE on the schema and SELECT on the version table,
// nothing on the records, tombstones or leases. It creates or migrates the
// schema first (so run it as the role that owns the schema, the
// coordinators'), is idempotent, and revokes nothing. The role must exist
// (ErrNoRole).
func GrantOpen(ctx context.Context, pool *pgxpool.Pool, schema, role string) error {
	if err := ValidateRole(role); err != nil {
		return err
	}
	st, err := OpenPool(ctx, pool, Options{Schema: schema})
	if err != nil {
		return err
	}
	schema = st.Schema()
	_ = st.Close()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: grant: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, GrantLockSQL, schema); err != nil {
		return fmt.Errorf("pgstore: grant: %w", err)
	}
	if err := roleExists(ctx, tx, role); err != nil {
		return err
	}
	r, s := pgx.Identifier{role}.Sanitize(), pgx.Identifier{schema}.Sanitize()
	if _, err := tx.Exec(ctx, `GRANT USAGE ON SCHEMA `+s+` TO `+r+`;
		GRANT SELECT ON `+s+`.`+schemaTable+` TO `+r); err != nil {
		return fmt.Errorf("pgstore: granting role %q the use of schema %q: %w", role, schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: grant: %w", err)
	}
	return nil
}

// ValidateRole refuses a role name PostgreSQL would not keep as given:
// empty, longer than 63 bytes (it would be cut short), not UTF-8 or with a
// NUL. Role names are always quoted as identifiers, so any other name is
// safe. The error matches ErrInvalidOptions.
func ValidateRole(role string) error {
	switch {
	case role == "":
		return fmt.Errorf("%w: empty role name", ErrInvalidOptions)
	case len(role) > maxIdentifier:
		return fmt.Errorf("%w: role name %q is %d bytes, more than %d", ErrInvalidOptions, role, len(role), maxIdentifier)
	case !utf8.ValidString(role) || strings.ContainsRune(role, 0):
		return fmt.Errorf("%w: role name %q is not valid UTF-8 without NUL", ErrInvalidOptions, role)
	}
	return nil
}

func roleExists(ctx context.Context, q queryRower, role string) error {
	var found bool
	if err := q.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_catalog.pg_roles WHERE rolname = $1)`, role).Scan(&found); err != nil {
		return fmt.Errorf("pgstore: looking role %q up: %w", role, err)
	}
	if !found {
		return fmt.Errorf("%w: %q (create it first, e.g. CREATE ROLE %s LOGIN PASSWORD '...')", ErrNoRole, role, pgx.Identifier{role}.Sanitize())
	}
	return nil
}

// checkRestrictedSQL lists what role $2 can do with schema $1 beyond
// reading the tables named in $3: every table and sequence privilege
// (column-level ones included) and CREATE on the schema.
const checkRestrictedSQL = `
	SELECT p.priv || ' on ' || c.relname
	FROM pg_catalog.pg_class c
	JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	CROSS JOIN unnest(ARRAY['SELECT', 'INSERT', 'UPDATE', 'DELETE', 'TRUNCATE', 'REFERENCES', 'TRIGGER']) p(priv)
	WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
		AND NOT (p.priv = 'SELECT' AND c.relname = ANY($3::text[]))
		AND CASE WHEN p.priv IN ('SELECT', 'INSERT', 'UPDATE', 'REFERENCES')
			THEN pg_catalog.has_any_column_privilege($2, c.oid, p.priv)
			ELSE pg_catalog.has_table_privilege($2, c.oid, p.priv) END
	UNION ALL
	SELECT p.priv || ' on ' || c.relname
	FROM pg_catalog.pg_class c
	JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
	CROSS JOIN unnest(ARRAY['USAGE', 'SELECT', 'UPDATE']) p(priv)
	WHERE n.nspname = $1 AND c.relkind = 'S' AND pg_catalog.has_sequence_privilege($2, c.oid, p.priv)
	UNION ALL
	SELECT 'CREATE on the schema' WHERE pg_catalog.has_schema_privilege($2, $1, 'CREATE')
	ORDER BY 1`

// CheckRestricted returns a *PrivilegeError (ErrPrivileged) when role can
// do more with schema than a restricted role may: create objects in it,
// or read, write, truncate or reference any of its tables or sequences
// directly, except reading the version table and the tables named in
// readable. A superuser, the schema's owner and its members hold all of
// that. schema "" is the default ("foreman"); role "" means the
// connection's own role (current_user), so that a process can check the
// role it was given. It does not look at functions:
// SECURITY DEFINER functions are how a restricted role does its work, and
// each checks what it is asked.
func CheckRestricted(ctx context.Context, pool *pgxpool.Pool, schema, role string, readable ...string) error {
	schema = or(schema, defaultSchema)
	if err := ValidateSchema(schema); err != nil {
		return err
	}
	if role == "" {
		if err := pool.QueryRow(ctx, `SELECT current_user`).Scan(&role); err != nil {
			return fmt.Errorf("pgstore: reading the connection's role: %w", err)
		}
	} else if err := ValidateRole(role); err != nil {
		return err
	}
	if err := roleExists(ctx, pool, role); err != nil {
		return err
	}
	rows, err := pool.Query(ctx, checkRestrictedSQL, schema, role, append([]string{schemaTable}, readable...))
	if err != nil {
		return fmt.Errorf("pgstore: checking role %q's privileges on schema %q: %w", role, schema, err)
	}
	held, err := pgx.CollectRows(rows, pgx.RowTo[string])
	if err != nil {
		return fmt.Errorf("pgstore: checking role %q's privileges on schema %q: %w", role, schema, err)
	}
	if len(held) > 0 {
		return &PrivilegeError{Schema: schema, Role: role, Held: held}
	}
	return nil
}
