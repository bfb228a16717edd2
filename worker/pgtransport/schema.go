package pgtransport

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/pipeline/pgstore"
)

// SchemaVersion is the version of the transport's tables this build writes
// and reads (kept in the table transport_schema, apart from the store's
// own version).
const SchemaVersion = 1

// The transport's tables, in the store's PostgreSQL schema ("@." stands for
// it). An assignment row lives from the coordinator's ASSIGN until its
// final message (DONE, FAILED, ...) or a KILL, RESET or SHUTDOWN deletes it:
// state 0 is open (claimable), 1 claimed by host. Heartbeats update the
// claimed row in place (hb_*), so they add no rows. Commands are addressed
// to the host that claimed the assignment; messages to the queue's
// coordinator. Every worker-side write joins the assignment row claimed by
// its host, so a message of an assignment that is not (or no longer) this
// host's is never written: the assignment id fences it across processes.
func migrations(fenceLock, fenceTerm string) []string {
	return []string{
		`CREATE TABLE @.wt_assignments (
			id         text COLLATE "C" PRIMARY KEY,
			seq        bigserial NOT NULL,
			queue      text COLLATE "C" NOT NULL,
			slot       text NOT NULL,
			lease      text NOT NULL,
			term       bigint NOT NULL,
			state      smallint NOT NULL DEFAULT 0 CHECK (state IN (0, 1)),
			body       jsonb NOT NULL,
			host       text,
			claimed_at timestamptz,
			hb_n       bigint NOT NULL DEFAULT 0,
			hb_at      timestamptz,
			hb_commit  text NOT NULL DEFAULT '',
			hb_output  timestamptz,
			created_at timestamptz NOT NULL DEFAULT clock_timestamp()
		);
		CREATE INDEX wt_assignments_open ON @.wt_assignments (queue, seq) WHERE state = 0;
		CREATE INDEX wt_assignments_beat ON @.wt_assignments (queue, hb_at) WHERE state = 1;
		CREATE TABLE @.wt_commands (
			seq        bigserial PRIMARY KEY,
			host       text NOT NULL,
			assignment text NOT NULL,
			kind       smallint NOT NULL,
			reason     text NOT NULL DEFAULT ''
		);
		CREATE INDEX wt_commands_host ON @.wt_commands (host, seq);
		CREATE TABLE @.wt_messages (
			seq        bigserial PRIMARY KEY,
			queue      text COLLATE "C" NOT NULL,
			assignment text NOT NULL,
			body       jsonb NOT NULL
		);
		CREATE INDEX wt_messages_queue ON @.wt_messages (queue, seq);
		CREATE FUNCTION @.wt_fence(p_lease text, p_term bigint) RETURNS bigint
		LANGUAGE plpgsql AS $fn$
		DECLARE
			cur bigint;
		BEGIN
			PERFORM ` + fenceLock + `;
			cur := coalesce(` + fenceTerm + `, 0);
			IF cur <> p_term THEN
				RAISE EXCEPTION 'fenced: lease % is at term %, not %', p_lease, cur, p_term
					USING ERRCODE = 'FM002', DETAIL = cur::text;
			END IF;
			RETURN cur;
		END
		$fn$`,
	}
}

const (
	schemaTable      = "transport_schema"
	fencedSQLState   = "FM002"
	migrationLockSQL = `SELECT pg_advisory_xact_lock(hashtext('foreman-transport-migrate:' || $1))`
)

// sqlFor fills in the schema: "@." becomes the quoted schema name and a dot.
func sqlFor(schema, statement string) string {
	return strings.ReplaceAll(statement, "@.", pgx.Identifier{schema}.Sanitize()+".")
}

// migrate creates or upgrades the transport's tables in the store's schema,
// in one transaction under an advisory lock (so hosts and coordinators
// starting together create them once). The store's own schema must exist:
// callers open a pgstore.Store on the pool first.
func migrate(ctx context.Context, pool *pgxpool.Pool, st *pgstore.Store) error {
	schema := st.Schema()
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("pgtransport: migrate: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, migrationLockSQL, schema); err != nil {
		return fmt.Errorf("pgtransport: migrate: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, `CREATE TABLE IF NOT EXISTS @.`+schemaTable+` (
		id int PRIMARY KEY CHECK (id = 1), version int NOT NULL)`)); err != nil {
		return fmt.Errorf("pgtransport: migrate: %w", err)
	}
	var found int
	err = tx.QueryRow(ctx, sqlFor(schema, `SELECT version FROM @.`+schemaTable+` WHERE id = 1`)).Scan(&found)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return fmt.Errorf("pgtransport: read schema version: %w", err)
	}
	if found > SchemaVersion {
		return &SchemaVersionError{Schema: schema, Found: found, Supported: SchemaVersion}
	}
	if found == SchemaVersion {
		return nil
	}
	lock, term := st.FenceSQL("p_lease")
	steps := migrations(lock, term)
	for v := found; v < SchemaVersion; v++ {
		if _, err := tx.Exec(ctx, sqlFor(schema, steps[v])); err != nil {
			return fmt.Errorf("pgtransport: migrating to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, `INSERT INTO @.`+schemaTable+` (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`), SchemaVersion); err != nil {
		return fmt.Errorf("pgtransport: migrate: %w", err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("pgtransport: migrate: %w", err)
	}
	return nil
}

// channel names a LISTEN/NOTIFY channel of this schema: a short hash, since
// channel names are identifiers of at most 63 bytes.
func channel(kind, schema, name string) string {
	sum := sha256.Sum256([]byte(schema + "/" + name))
	return "fm_" + kind + "_" + hex.EncodeToString(sum[:10])
}

// hostChannelSQL computes, in SQL, channel("h", schema, host) for the host
// named by the expression host.
func hostChannelSQL(schema, host string) string {
	lit := "'" + strings.ReplaceAll(schema, "'", "''") + "/'"
	return "'fm_h_' || left(encode(sha256(convert_to(" + lit + " || " + host + ", 'UTF8')), 'hex'), 20)"
}

// fencedError turns the fence function's refusal into a *pgstore.FencedError.
func fencedError(err error, lease string, term int64) error {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) || pe.Code != fencedSQLState {
		return nil
	}
	fe := &pgstore.FencedError{Lease: lease, Term: term}
	_, _ = fmt.Sscan(pe.Detail, &fe.Current)
	return fe
}
