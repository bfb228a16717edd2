package pgstore

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// SchemaVersion is the schema version this build writes and reads.
const SchemaVersion = 2

// migrations()[i] takes the schema from version i to version i+1. Steps are
// only ever appended (and SchemaVersion raised with them); a released step
// is never edited. "@." stands for the quoted schema name and a dot.
func migrations() []string {
	return []string{
		// 0 -> 1: the data. Kind and id use the "C" collation, so that the
		// primary key orders them byte-wise (Go's string order) whatever the
		// database's default collation, and serves both Get and the ordered
		// range scan of List. Tombstones live in their own table, so that
		// records holds live records only and List does not slow down as
		// deletes pile up.
		`CREATE TABLE @.records (
			kind       text COLLATE "C" NOT NULL,
			id         text COLLATE "C" NOT NULL,
			version    bigint NOT NULL CHECK (version >= 1),
			data       bytea NOT NULL,
			updated_at timestamptz NOT NULL,
			PRIMARY KEY (kind, id)
		);
		CREATE TABLE @.tombstones (
			kind       text COLLATE "C" NOT NULL,
			id         text COLLATE "C" NOT NULL,
			version    bigint NOT NULL CHECK (version >= 1),
			deleted_at timestamptz NOT NULL,
			PRIMARY KEY (kind, id)
		)`,
		// 1 -> 2: leases for leadership, and the write function that applies a
		// group commit's batches, each fenced by a lease term if asked.
		`CREATE TABLE @.leases (
			name        text COLLATE "C" PRIMARY KEY,
			holder      text NOT NULL,
			term        bigint NOT NULL CHECK (term >= 1),
			expires_at  timestamptz NOT NULL,
			acquired_at timestamptz NOT NULL
		);
		` + applyBatchFunction,
	}
}

// applyBatchFunction applies the batches of one group commit in one call (a
// single round trip and, in autocommit, one WAL flush). Batch a is the ops
// whose p_batch entry is a (ascending, contiguous). Each batch runs in its
// own exception block, a subtransaction: a conflict rolls back that batch
// only and is reported as a row; the others commit.
//
// Fencing: before anything else the call takes, for each lease its batches
// are fenced by, a shared transaction-level advisory lock on that lease,
// and each fenced batch then reads the lease's term in a statement of its
// own, so after the lock. A takeover takes the same lock exclusively before
// it raises the term (see tryLead), so it waits for every fenced write in
// flight, and every fenced write that gets the lock after it reads the new
// term. PostgreSQL queues lock requests fairly, so a stream of writes
// cannot starve a takeover, and renewals, which do not take the lock,
// never wait for writes. Taking the locks first, before any row lock,
// keeps a takeover out of lock cycles with row locks.
//
// Under READ COMMITTED every statement reads the latest committed data, so
// a create re-reads the tombstone in a statement of its own after its
// INSERT: that INSERT may have waited for a concurrent delete of the same
// record, whose tombstone its own snapshot did not see.
const applyBatchFunction = `CREATE FUNCTION @.apply_batch(
	p_at timestamptz,
	p_batch int[], p_kind text[], p_id text[], p_expect bigint[], p_data bytea[], p_delete bool[],
	p_fence_lease text[], p_fence_term bigint[]
) RETURNS TABLE (batch int, outcome text, versions bigint[], conflict_op int, actual bigint, current_term bigint)
LANGUAGE plpgsql AS $fn$
DECLARE
	n_ops int := coalesce(array_length(p_kind, 1), 0);
	n_batches int := coalesce(array_length(p_fence_lease, 1), 0);
	first int := 1;
	j int;
	v bigint;
	tv bigint;
BEGIN
	PERFORM pg_advisory_xact_lock_shared(@leaselock(f.lease))
		FROM (SELECT DISTINCT unnest(p_fence_lease) AS lease ORDER BY 1) f WHERE f.lease <> '';
	FOR a IN 1 .. n_batches LOOP
		batch := a; outcome := 'ok'; versions := '{}'; conflict_op := NULL; actual := NULL; current_term := NULL;
		j := first;
		BEGIN
			IF p_fence_lease[a] <> '' THEN
				SELECT l.term INTO current_term FROM @.leases l WHERE l.name = p_fence_lease[a];
				current_term := coalesce(current_term, 0);
				IF current_term <> p_fence_term[a] THEN
					outcome := 'fenced';
				END IF;
			END IF;
			WHILE outcome = 'ok' AND j <= n_ops AND p_batch[j] = a LOOP
				IF p_delete[j] THEN
					DELETE FROM @.records r
						WHERE r.kind = p_kind[j] AND r.id = p_id[j] AND r.version = p_expect[j];
					IF NOT FOUND THEN
						conflict_op := j - first;
						RAISE SQLSTATE 'FM001';
					END IF;
					INSERT INTO @.tombstones AS t (kind, id, version, deleted_at)
						VALUES (p_kind[j], p_id[j], p_expect[j], p_at)
						ON CONFLICT (kind, id) DO UPDATE
						SET version = greatest(t.version, excluded.version), deleted_at = excluded.deleted_at;
					versions := versions || 0::bigint;
				ELSIF p_expect[j] = 0 THEN
					INSERT INTO @.records AS r (kind, id, version, data, updated_at)
						VALUES (p_kind[j], p_id[j],
							1 + coalesce((SELECT t.version FROM @.tombstones t WHERE t.kind = p_kind[j] AND t.id = p_id[j]), 0),
							coalesce(p_data[j], ''::bytea), p_at)
						ON CONFLICT (kind, id) DO NOTHING
						RETURNING r.version INTO v;
					IF NOT FOUND THEN
						conflict_op := j - first;
						RAISE SQLSTATE 'FM001';
					END IF;
					DELETE FROM @.tombstones t WHERE t.kind = p_kind[j] AND t.id = p_id[j] RETURNING t.version INTO tv;
					IF FOUND AND tv + 1 > v THEN
						v := tv + 1;
						UPDATE @.records r SET version = v WHERE r.kind = p_kind[j] AND r.id = p_id[j];
					END IF;
					versions := versions || v;
				ELSE
					UPDATE @.records r
						SET version = r.version + 1, data = coalesce(p_data[j], ''::bytea), updated_at = p_at
						WHERE r.kind = p_kind[j] AND r.id = p_id[j] AND r.version = p_expect[j]
						RETURNING r.version INTO v;
					IF NOT FOUND THEN
						conflict_op := j - first;
						RAISE SQLSTATE 'FM001';
					END IF;
					versions := versions || v;
				END IF;
				j := j + 1;
			END LOOP;
		EXCEPTION WHEN SQLSTATE 'FM001' THEN
			outcome := 'conflict';
			versions := NULL;
			SELECT r.version INTO actual FROM @.records r
				WHERE r.kind = p_kind[first + conflict_op] AND r.id = p_id[first + conflict_op];
			actual := coalesce(actual, 0);
		END;
		IF outcome = 'fenced' THEN
			versions := NULL;
		END IF;
		WHILE first <= n_ops AND p_batch[first] = a LOOP
			first := first + 1;
		END LOOP;
		RETURN NEXT;
	END LOOP;
END
$fn$`

const schemaTable = "foreman_schema"

// sqlFor fills in a statement: "@." becomes the store's quoted schema name
// and a dot, and "@leaselock(x)" the advisory lock key of lease x in this
// schema (two int4 halves: PostgreSQL keeps those apart from the one-int8
// keys of the migration lock).
func sqlFor(schema, statement string) string {
	literal := "'" + strings.ReplaceAll(schema, "'", "''") + "'"
	statement = strings.ReplaceAll(statement, "@leaselock(", "hashtext("+literal+"), hashtext(")
	return strings.ReplaceAll(statement, "@.", pgx.Identifier{schema}.Sanitize()+".")
}

// migrationLockKey names the advisory lock that serializes migrations of
// one schema across processes; hashtext keeps it per schema.
const migrationLockSQL = `SELECT pg_advisory_xact_lock(hashtext('foreman-migrate:' || $1))`

// migrate brings the schema to SchemaVersion inside one transaction, under
// a transaction-scoped advisory lock, so that two processes opening a new
// database at once cannot both create it; PostgreSQL's DDL is
// transactional, so a failed step leaves nothing behind. A schema from a
// newer build, or a foreign one, is refused untouched.
func migrate(ctx context.Context, pool *pgxpool.Pool, schema string, target int) error {
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, migrationLockSQL, schema); err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	found, err := readSchemaVersion(ctx, tx, schema)
	if err != nil {
		return err
	}
	if found > SchemaVersion {
		return &SchemaVersionError{Schema: schema, Found: found, Supported: SchemaVersion}
	}
	if found >= target {
		return nil
	}
	if found == 0 {
		if _, err := tx.Exec(ctx, sqlFor(schema, `CREATE SCHEMA IF NOT EXISTS `+pgx.Identifier{schema}.Sanitize()+`;
			CREATE TABLE @.`+schemaTable+` (
				id      int PRIMARY KEY CHECK (id = 1),
				version int NOT NULL
			)`)); err != nil {
			return fmt.Errorf("pgstore: create schema %q: %w", schema, err)
		}
	}
	steps := migrations()
	for v := found; v < target; v++ {
		if _, err := tx.Exec(ctx, sqlFor(schema, steps[v])); err != nil {
			return fmt.Errorf("pgstore: migrating schema %q to version %d: %w", schema, v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, `INSERT INTO @.`+schemaTable+` (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`), target); err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgstore: migrate schema %q: %w", schema, err)
	}
	return nil
}

type queryRower interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}

// readSchemaVersion returns 0 when the schema does not exist or is empty,
// and refuses one that has tables but no schema table.
func readSchemaVersion(ctx context.Context, q queryRower, schema string) (int, error) {
	var tables int
	var haveSchemaTable bool
	err := q.QueryRow(ctx, `SELECT count(*), coalesce(bool_or(c.relname = $2), false)
		FROM pg_catalog.pg_class c JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = $1 AND c.relkind IN ('r', 'p', 'v', 'm', 'f')`, schema, schemaTable).Scan(&tables, &haveSchemaTable)
	if err != nil {
		return 0, fmt.Errorf("pgstore: read schema %q: %w", schema, err)
	}
	if !haveSchemaTable {
		if tables > 0 {
			return 0, fmt.Errorf("%w: schema %q has %d tables but no %s table", ErrForeignSchema, schema, tables, schemaTable)
		}
		return 0, nil
	}
	var version int
	err = q.QueryRow(ctx, sqlFor(schema, `SELECT version FROM @.`+schemaTable+` WHERE id = 1`)).Scan(&version)
	if errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("%w: schema %q: %s has no row", ErrForeignSchema, schema, schemaTable)
	}
	if err != nil {
		return 0, fmt.Errorf("pgstore: read schema %q: %w", schema, err)
	}
	return version, nil
}
