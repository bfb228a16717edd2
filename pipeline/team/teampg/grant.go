package teampg

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// ErrNotGranted is matched by OpenWorkerStore's error when its role may
// not use the team's worker functions (no coordinator granted it, or none
// of this build installed them), and by a WorkerStore's List, which a
// worker host never needs.
var ErrNotGranted = errors.New("teampg: not granted to a worker host")

// What a worker host may read and write of the team's records, and why.
// A host performs the stages of the assignments it claimed (the
// transport's wt_assignments rows whose owner is the role it logged in
// with), and the team's stage agent records, per story, the board entry
// (team.board), the story's memory (team.memory: gate feedback, the
// verified change, the open build) and the refusals of hostile agents
// (team.refused); per pipeline assignment the build's starting point
// (team.base, keyed by the pipeline's assignment id, which Remote makes
// the transport assignment's worker slot); and per transport assignment
// the stage's result (team.stage-result). It reads the team's secret
// (team.secret/assignments), from which each assignment's report key and
// result directory are derived, and creates it when no coordinator has
// yet. Everything else (stories, decisions, the task graph, the
// pipeline's records, events, leases) it neither reads nor writes, and it
// deletes nothing.
//
// team_worker_may is the rule; team_worker_get and team_worker_apply are
// the only way in (SECURITY DEFINER: they run as the schema's owner, and a
// worker's role has no privilege on the records table). A request outside
// the rule is refused with SQLSTATE 42501. The writes go through the
// store's own apply_batch (versions, tombstones), unfenced, as one batch.
func workerFunctions() string {
	claimed := `SELECT 1 FROM @.wt_assignments a WHERE a.state = 1 AND a.owner = session_user AND `
	return `
	CREATE OR REPLACE FUNCTION @.team_worker_may(p_kind text, p_id text) RETURNS bool
	LANGUAGE plpgsql STABLE SET search_path = pg_catalog, pg_temp AS $fn$
	BEGIN
		-- First, and on its own: a host reads the secret before the
		-- transport's tables need to exist (PL/pgSQL plans a statement when
		-- it first runs it).
		IF p_kind = 'team.secret' THEN
			RETURN p_id = 'assignments';
		END IF;
		RETURN CASE
			WHEN p_kind IN ('team.board', 'team.memory', 'team.refused') THEN EXISTS (` + claimed + `(a.body ->> 'Item') = p_id)
			WHEN p_kind = 'team.base' THEN EXISTS (` + claimed + `a.slot = p_id)
			WHEN p_kind = 'team.stage-result' THEN EXISTS (` + claimed + `a.id = p_id)
			ELSE false END;
	END
	$fn$;
	CREATE OR REPLACE FUNCTION @.team_worker_get(p_kind text, p_id text)
	RETURNS TABLE (o_version bigint, o_data bytea, o_updated_at timestamptz)
	LANGUAGE plpgsql STABLE SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
	BEGIN
		IF NOT coalesce(@.team_worker_may(p_kind, p_id), false) THEN
			RAISE EXCEPTION 'permission denied: a worker host reads no % record %', p_kind, p_id
				USING ERRCODE = 'insufficient_privilege',
				HINT = 'a worker host reads the team secret and, of the stories it claimed, their board, memory, refusals, build bases and stage results';
		END IF;
		RETURN QUERY SELECT r.version, r.data, r.updated_at FROM @.records r WHERE r.kind = p_kind AND r.id = p_id;
	END
	$fn$;
	CREATE OR REPLACE FUNCTION @.team_worker_apply(p_at timestamptz, p_kind text[], p_id text[], p_expect bigint[], p_data bytea[], p_delete bool[])
	RETURNS TABLE (o_outcome text, o_versions bigint[], o_conflict_op int, o_actual bigint)
	LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, pg_temp AS $fn$
	DECLARE
		n int := coalesce(array_length(p_kind, 1), 0);
	BEGIN
		IF coalesce(array_length(p_id, 1), 0) <> n OR coalesce(array_length(p_expect, 1), 0) <> n
			OR coalesce(array_length(p_data, 1), 0) <> n OR coalesce(array_length(p_delete, 1), 0) <> n THEN
			RAISE EXCEPTION 'team_worker_apply: arrays of different lengths' USING ERRCODE = 'invalid_parameter_value';
		END IF;
		FOR j IN 1 .. n LOOP
			IF p_delete[j] IS DISTINCT FROM false THEN
				RAISE EXCEPTION 'permission denied: a worker host deletes no record (% %)', p_kind[j], p_id[j]
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			IF p_kind[j] = 'team.secret' AND p_expect[j] IS DISTINCT FROM 0 THEN
				RAISE EXCEPTION 'permission denied: a worker host creates the team secret only where there is none'
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			IF NOT coalesce(@.team_worker_may(p_kind[j], p_id[j]), false) THEN
				RAISE EXCEPTION 'permission denied: a worker host writes no % record %', p_kind[j], p_id[j]
					USING ERRCODE = 'insufficient_privilege',
					HINT = 'a worker host writes, of the stories it claimed, their board, memory, refusals, build bases and stage results';
			END IF;
		END LOOP;
		RETURN QUERY SELECT b.outcome, b.versions, b.conflict_op, b.actual
			FROM @.apply_batch(p_at, array_fill(1, ARRAY[n]), p_kind, p_id, p_expect, p_data, p_delete, ARRAY[''], ARRAY[0::bigint]) b;
	END
	$fn$;
	REVOKE ALL ON FUNCTION @.team_worker_may(text, text), @.team_worker_get(text, text), ` + applySignature + ` FROM PUBLIC;
	COMMENT ON FUNCTION ` + applySignature + ` IS '` + workerFunctionsVersion + `'`
}

const (
	// workerFunctionsVersion marks the installed functions (a comment on
	// team_worker_apply): a coordinator of a build with other functions
	// replaces them.
	workerFunctionsVersion = "foreman team worker functions v1"
	getSignature           = "@.team_worker_get(text, text)"
	applySignature         = "@.team_worker_apply(timestamptz, text[], text[], bigint[], bytea[], bool[])"
)

func sqlFor(schema, statement string) string {
	return strings.ReplaceAll(statement, "@.", pgx.Identifier{schema}.Sanitize()+".")
}

// workerFunctionsState says whether this build's worker functions are in
// schema and whether the pool's role may call them.
func workerFunctionsState(ctx context.Context, pool *pgxpool.Pool, schema string) (current, callable bool, err error) {
	err = pool.QueryRow(ctx, `SELECT coalesce(obj_description(x.apply, 'pg_proc') = $3, false),
			coalesce(has_function_privilege(x.apply, 'EXECUTE') AND has_function_privilege(x.get, 'EXECUTE'), false)
		FROM (SELECT to_regprocedure($1) AS apply, to_regprocedure($2) AS get) x`,
		sqlFor(schema, applySignature), sqlFor(schema, getSignature), workerFunctionsVersion).Scan(&current, &callable)
	if err != nil {
		return false, false, fmt.Errorf("teampg: looking up the worker functions in schema %q: %w", schema, err)
	}
	return current, callable, nil
}

// installWorkerFunctions creates or replaces the worker functions in
// schema unless this build's are there, under the schema's grant lock (run
// as the schema's owner: Lead and GrantWorker do).
func installWorkerFunctions(ctx context.Context, pool *pgxpool.Pool, schema string) error {
	if current, _, err := workerFunctionsState(ctx, pool, schema); err != nil || current {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("teampg: installing the worker functions: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, pgstore.GrantLockSQL, schema); err != nil {
		return fmt.Errorf("teampg: installing the worker functions: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, workerFunctions())); err != nil {
		return fmt.Errorf("teampg: installing the worker functions in schema %q: %w", schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("teampg: installing the worker functions: %w", err)
	}
	return nil
}

// GrantWorker lets the database role serve as a worker host of the team
// in schema, and nothing more: pgtransport.GrantWorker (claim, beat,
// report for its own claims) and the team's worker functions, through
// which a WorkerStore reads the team's secret and reads and writes the
// board, memory, refusals, build bases and stage results of the stories
// its role claimed (see OpenWorkerStore). It grants no privilege on any
// table: a worker host's role cannot read or write the stories, the
// decisions, the pipeline's or the task graph's records, events, leases or
// another role's claims, and cannot create anything. Run it as the role
// that owns the schema (the coordinators'; Lead does for
// LeadConfig.WorkerRoles); it is idempotent. schema "" is the default
// ("foreman").
//
// Errors: pgstore.ErrNoRole for a role that does not exist (create it
// first: CREATE ROLE name LOGIN PASSWORD '...'), pgstore.ErrPrivileged
// (a *pgstore.PrivilegeError) for a role that can already do more (a
// superuser, the schema's owner or a member of its role).
func GrantWorker(ctx context.Context, pool *pgxpool.Pool, schema, role string) error {
	if pool == nil {
		return fmt.Errorf("%w: GrantWorker: nil pool", ErrInvalidConfig)
	}
	if schema == "" {
		schema = defaultSchema
	}
	if err := pgtransport.GrantWorker(ctx, pool, schema, role); err != nil {
		return err
	}
	if err := installWorkerFunctions(ctx, pool, schema); err != nil {
		return err
	}
	tx, err := pool.Begin(ctx)
	if err != nil {
		return fmt.Errorf("teampg: grant: %w", err)
	}
	defer func() { _ = tx.Rollback(ctx) }()
	if _, err := tx.Exec(ctx, pgstore.GrantLockSQL, schema); err != nil {
		return fmt.Errorf("teampg: grant: %w", err)
	}
	if _, err := tx.Exec(ctx, sqlFor(schema, `GRANT EXECUTE ON FUNCTION `+getSignature+`, `+applySignature+` TO `+
		pgx.Identifier{role}.Sanitize())); err != nil {
		return fmt.Errorf("teampg: granting role %q the team's worker functions in schema %q: %w", role, schema, err)
	}
	if err := tx.Commit(ctx); err != nil {
		return fmt.Errorf("teampg: grant: %w", err)
	}
	return nil
}

// defaultSchema is pgstore's default schema.
const defaultSchema = "foreman"

// refused reports whether PostgreSQL refused err for want of privilege.
func refused(err error) bool {
	var pe *pgconn.PgError
	return errors.As(err, &pe) && pe.Code == "42501"
}
