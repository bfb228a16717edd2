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
const SchemaVersion = 7

// The transport's tables, in the store's PostgreSQL schema ("@." stands for
// it). An assignment row lives from the coordinator's ASSIGN until the
// coordinator delivered its final message (DONE, FAILED, ...), or until a
// KILL, RESET or SHUTDOWN deletes it: state 0 is open (claimable), 1
// claimed by host, 2 (from version 4) finished, with the final message in
// the row (finalInRow). Heartbeats update the
// claimed row in place (hb_*), so they add no rows. Commands are addressed
// to the host that claimed the assignment; messages to the queue's
// coordinator. Every worker-side write joins the assignment row claimed by
// its host, so a message of an assignment that is not (or no longer) this
// host's is never written: the assignment id fences it across processes.
func migrations(fenceLock, fenceTerm, schema string) []string {
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
		hostFunctions(schema),
		indexedHostFunctions(schema),
		finalInRow(schema),
		leanRound(schema),
		pollPromise(schema),
		doneLog(schema),
	}
}

// hostFunctions is migration 1 -> 2: a host does everything through these
// SECURITY DEFINER functions (hostStatements), so that a worker host's
// database role needs no privilege on any table (GrantWorker). Each claim
// records the claiming role (owner, session_user: the role the host
// logged in with) beside the host's name, and every later write of a host
// is joined to rows claimed by its role as well as its name: a role acts
// only for its own claims, and naming another role's claim is refused
// with SQLSTATE 42501 (insufficient_privilege). A message must name the
// assignment it is written for, so no claim carries another assignment's
// outcome. Commands carry the owner of the assignment they are for, and a
// role takes only its own. The functions run as their owner, with a
// search_path of pg_catalog only (every name in them is qualified), and
// nobody but the owner may call them until GrantWorker grants a role.
// PL/pgSQL, not SQL: PostgreSQL 15 plans a SQL function's statements on
// every call, PL/pgSQL keeps its plans for the session.
func hostFunctions(schema string) string {
	prefix := "'" + strings.ReplaceAll(schema+"/", "'", "''") + "'"
	return `ALTER TABLE @.wt_assignments ADD COLUMN owner text;
		ALTER TABLE @.wt_commands ADD COLUMN owner text;
		CREATE FUNCTION @.wt_refuse_foreign(p_ids text[], p_bodies text[]) RETURNS void
		LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp AS $fn$
		DECLARE
			bad text;
			who text;
		BEGIN
			SELECT a.id, a.owner INTO bad, who FROM @.wt_assignments a
				WHERE a.id = ANY(p_ids) AND a.state = 1 AND a.owner <> session_user LIMIT 1;
			IF bad IS NOT NULL THEN
				RAISE EXCEPTION 'permission denied: assignment % is claimed by role %, not by %', bad, who, session_user
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			SELECT u.id INTO bad FROM unnest(p_ids, p_bodies) u(id, body)
				WHERE u.body IS NOT NULL AND (u.body::jsonb ->> 'Assignment') IS DISTINCT FROM u.id LIMIT 1;
			IF bad IS NOT NULL THEN
				RAISE EXCEPTION 'permission denied: a message written for assignment % names another assignment', bad
					USING ERRCODE = 'insufficient_privilege';
			END IF;
		END
		$fn$;
		CREATE FUNCTION @.wt_claim(p_host text, p_queue text, p_limit int)
		RETURNS TABLE (o_seq bigint, o_body jsonb)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
		BEGIN
			RETURN QUERY UPDATE @.wt_assignments a
			SET state = 1, host = p_host, owner = session_user, claimed_at = clock_timestamp(), hb_at = clock_timestamp()
			FROM (SELECT w.id FROM @.wt_assignments w
				WHERE w.queue = p_queue AND w.state = 0 ORDER BY w.seq LIMIT p_limit FOR UPDATE SKIP LOCKED) c
			WHERE a.id = c.id
			RETURNING a.seq, a.body;
		END
		$fn$;
		CREATE FUNCTION @.wt_host_write(p_host text, p_ids text[], p_bodies text[], p_finals bool[])
		RETURNS TABLE (o_written bigint, o_finished bigint, o_notified bigint)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
		BEGIN
			PERFORM @.wt_refuse_foreign(p_ids, p_bodies);
			RETURN QUERY WITH m AS (
				SELECT u.assignment, u.body, u.final, u.ord
				FROM unnest(p_ids, p_bodies, p_finals) WITH ORDINALITY u(assignment, body, final, ord)),
			ok AS (SELECT m.*, a.queue FROM m JOIN @.wt_assignments a
				ON a.id = m.assignment AND a.host = p_host AND a.owner = session_user AND a.state = 1),
			ins AS (INSERT INTO @.wt_messages (queue, assignment, body)
				SELECT ok.queue, ok.assignment, ok.body::jsonb FROM ok ORDER BY ok.ord
				RETURNING queue),
			fin AS (DELETE FROM @.wt_assignments a USING ok
				WHERE ok.final AND a.id = ok.assignment AND a.host = p_host AND a.owner = session_user AND a.state = 1
				RETURNING a.id)
			SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM fin),
				(SELECT count(pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20), '')::text)
					FROM (SELECT DISTINCT ins.queue FROM ins) q);
		END
		$fn$;
		CREATE FUNCTION @.wt_heartbeats(p_host text, p_ids text[], p_commits text[], p_outs bigint[])
		RETURNS TABLE (o_id text)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
		BEGIN
			PERFORM @.wt_refuse_foreign(p_ids, NULL);
			RETURN QUERY UPDATE @.wt_assignments a
			SET hb_n = a.hb_n + 1, hb_at = clock_timestamp(), hb_commit = h.commit,
				hb_output = CASE WHEN h.out = 0 THEN a.hb_output ELSE to_timestamp(h.out / 1e6) END
			FROM unnest(p_ids, p_commits, p_outs) h(id, commit, out)
			WHERE a.id = h.id AND a.host = p_host AND a.owner = session_user AND a.state = 1
			RETURNING a.id;
		END
		$fn$;
		CREATE FUNCTION @.wt_take_commands(p_host text)
		RETURNS TABLE (o_seq bigint, o_assignment text, o_kind smallint, o_reason text)
		LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
		BEGIN
			RETURN QUERY DELETE FROM @.wt_commands c WHERE c.host = p_host AND c.owner = session_user
			RETURNING c.seq, c.assignment, c.kind, c.reason;
		END
		$fn$;
		REVOKE ALL ON FUNCTION @.wt_refuse_foreign(text[], text[]), @.wt_claim(text, text, int),
			@.wt_host_write(text, text[], text[], bool[]), @.wt_heartbeats(text, text[], text[], bigint[]),
			@.wt_take_commands(text) FROM PUBLIC`
}

// hostFunctionSignatures are the functions GrantWorker lets a worker role
// call (wt_refuse_foreign is theirs only).
func hostFunctionSignatures() []string {
	return []string{"wt_claim(text, text, int)", "wt_host_write(text, text[], text[], bool[])",
		"wt_heartbeats(text, text[], text[], bigint[])", "wt_take_commands(text)",
		"wt_host_round(text, text, text[], text[], bool[], text[], text[], bigint[], int)"}
}

const (
	schemaTable    = "transport_schema"
	fencedSQLState = "FM002"
	// insufficientPrivilege is SQLSTATE 42501: what PostgreSQL answers a
	// role that may not do what it asked, and what the host functions
	// raise for another role's claim.
	insufficientPrivilege = "42501"
	migrationLockSQL      = `SELECT pg_advisory_xact_lock(hashtext('foreman-transport-migrate:' || $1))`
)

// sqlFor fills in the schema: "@." becomes the quoted schema name and a dot.
func sqlFor(schema, statement string) string {
	return strings.ReplaceAll(statement, "@.", pgx.Identifier{schema}.Sanitize()+".")
}

// migrate creates or upgrades the transport's tables in the store's schema,
// in one transaction under an advisory lock (so hosts and coordinators
// starting together create them once). The store's own schema must exist:
// callers open a pgstore.Store on the pool first. Tables already at this
// build's version are only read, so a worker host whose role may not
// create anything (GrantWorker) opens them; one that would have to migrate
// them fails with ErrNotMigrated.
func migrate(ctx context.Context, pool *pgxpool.Pool, st *pgstore.Store) error {
	schema := st.Schema()
	found, err := readVersion(ctx, pool, schema)
	if err != nil {
		return err
	}
	if found > SchemaVersion {
		return &SchemaVersionError{Schema: schema, Found: found, Supported: SchemaVersion}
	}
	if found == SchemaVersion {
		return nil
	}
	err = migrateLocked(ctx, pool, st, SchemaVersion)
	var pe *pgconn.PgError
	if errors.As(err, &pe) && pe.Code == insufficientPrivilege {
		return fmt.Errorf("%w: schema %q has the transport's tables at version %d, this build needs %d, and this role cannot make them (%w): "+
			"start a coordinator of this build first (a worker host's role migrates nothing)", ErrNotMigrated, schema, found, SchemaVersion, err)
	}
	return err
}

// readVersion is the transport tables' version in schema, 0 when there are
// none.
func readVersion(ctx context.Context, q interface {
	QueryRow(ctx context.Context, sql string, args ...any) pgx.Row
}, schema string) (int, error) {
	var exists bool
	if err := q.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, pgx.Identifier{schema, schemaTable}.Sanitize()).Scan(&exists); err != nil {
		return 0, fmt.Errorf("pgtransport: read schema version: %w", err)
	}
	if !exists {
		return 0, nil
	}
	var found int
	err := q.QueryRow(ctx, sqlFor(schema, `SELECT version FROM @.`+schemaTable+` WHERE id = 1`)).Scan(&found)
	if err != nil && !errors.Is(err, pgx.ErrNoRows) {
		return 0, fmt.Errorf("pgtransport: read schema version: %w", err)
	}
	return found, nil
}

// migrateLocked migrates the tables to version target (SchemaVersion but in
// the tests of an upgrade).
func migrateLocked(ctx context.Context, pool *pgxpool.Pool, st *pgstore.Store, target int) error {
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
	found, err := readVersion(ctx, tx, schema)
	if err != nil {
		return err
	}
	if found > SchemaVersion {
		return &SchemaVersionError{Schema: schema, Found: found, Supported: SchemaVersion}
	}
	if found >= target {
		return nil
	}
	lock, term := st.FenceSQL("p_lease")
	steps := migrations(lock, term, schema)
	for v := found; v < target; v++ {
		if _, err := tx.Exec(ctx, sqlFor(schema, steps[v])); err != nil {
			return fmt.Errorf("pgtransport: migrating to version %d: %w", v+1, err)
		}
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, `INSERT INTO @.`+schemaTable+` (id, version) VALUES (1, $1)
		ON CONFLICT (id) DO UPDATE SET version = excluded.version`), target); err != nil {
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
