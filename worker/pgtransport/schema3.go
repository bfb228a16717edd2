package pgtransport

import "strings"

// indexedHostFunctions is migration 2 -> 3: the same host functions, with
// the same checks and results, written so that PostgreSQL finds the rows
// they name through the primary key whatever it thinks of the table's size.
//
// The assignment table churns (every hand-off inserts, updates and deletes
// a row) and stays small in live rows, so the plans a session caches for
// the functions (planned once, while the table looked empty) scanned the
// whole heap, dead rows included, on every call: between two autovacuums
// a busy queue's table holds thousands of dead rows, and the host's write
// and its foreign-claim check cost 0.3-0.8 ms a call (pg_stat_statements,
// docs/performance.md). Every lookup by id now names the ids as an array
// (a.id = ANY(...), which the primary key answers) and tests the state as
// a.state::int = 1, which is not the predicate of the partial indexes on
// state (so the planner cannot pick the heartbeat index, whose every
// claimed, beaten or finished row leaves an entry until vacuum: 2,600
// entries and 149 heap blocks read to find 8 rows, auto_explain showed),
// and the functions turn sequential scans off for their own statements,
// so that the planner's estimate of a tiny table cannot choose one.
//
// It also drops the heartbeat index (queue, hb_at) and leaves a third of
// each page free, so that a heartbeat, which changes no indexed column any
// more, is a HOT update: no index entries, a fraction of the WAL, and
// pages that prune themselves. The coordinator's heartbeat read, once per
// PollInterval, scans the queue's claimed rows instead (some thousands of
// rows a second at 10,000 runs: see docs/performance.md).
func indexedHostFunctions(schema string) string {
	prefix := "'" + strings.ReplaceAll(schema+"/", "'", "''") + "'"
	const noScans = `SET search_path = pg_catalog, pg_temp SET enable_seqscan = off`
	return `DROP INDEX @.wt_assignments_beat;
		ALTER TABLE @.wt_assignments SET (fillfactor = 70);
		CREATE OR REPLACE FUNCTION @.wt_refuse_foreign(p_ids text[], p_bodies text[]) RETURNS void
		LANGUAGE plpgsql ` + noScans + ` AS $fn$
		DECLARE
			bad text;
			who text;
		BEGIN
			SELECT a.id, a.owner INTO bad, who FROM @.wt_assignments a
				WHERE a.id = ANY(p_ids) AND a.state::int = 1 AND a.owner <> session_user LIMIT 1;
			IF bad IS NOT NULL THEN
				RAISE EXCEPTION 'permission denied: assignment % is claimed by role %, not by %', bad, who, session_user
					USING ERRCODE = 'insufficient_privilege';
			END IF;
			IF p_bodies IS NULL THEN
				RETURN;
			END IF;
			SELECT u.id INTO bad FROM unnest(p_ids, p_bodies) u(id, body)
				WHERE u.body IS NOT NULL AND (u.body::jsonb ->> 'Assignment') IS DISTINCT FROM u.id LIMIT 1;
			IF bad IS NOT NULL THEN
				RAISE EXCEPTION 'permission denied: a message written for assignment % names another assignment', bad
					USING ERRCODE = 'insufficient_privilege';
			END IF;
		END
		$fn$;
		CREATE OR REPLACE FUNCTION @.wt_claim(p_host text, p_queue text, p_limit int)
		RETURNS TABLE (o_seq bigint, o_body jsonb)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		BEGIN
			RETURN QUERY UPDATE @.wt_assignments a
			SET state = 1, host = p_host, owner = session_user, claimed_at = clock_timestamp(), hb_at = clock_timestamp()
			FROM (SELECT w.id FROM @.wt_assignments w
				WHERE w.queue = p_queue AND w.state = 0 ORDER BY w.seq LIMIT p_limit FOR UPDATE SKIP LOCKED) c
			WHERE a.id = c.id
			RETURNING a.seq, a.body;
		END
		$fn$;
		CREATE OR REPLACE FUNCTION @.wt_host_write(p_host text, p_ids text[], p_bodies text[], p_finals bool[])
		RETURNS TABLE (o_written bigint, o_finished bigint, o_notified bigint)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		BEGIN
			PERFORM @.wt_refuse_foreign(p_ids, p_bodies);
			RETURN QUERY WITH m AS (
				SELECT u.assignment, u.body, u.final, u.ord
				FROM unnest(p_ids, p_bodies, p_finals) WITH ORDINALITY u(assignment, body, final, ord)),
			mine AS (SELECT a.id, a.queue FROM @.wt_assignments a
				WHERE a.id = ANY(p_ids) AND a.host = p_host AND a.owner = session_user AND a.state::int = 1),
			ok AS (SELECT m.*, mine.queue FROM m JOIN mine ON mine.id = m.assignment),
			ins AS (INSERT INTO @.wt_messages (queue, assignment, body)
				SELECT ok.queue, ok.assignment, ok.body::jsonb FROM ok ORDER BY ok.ord
				RETURNING queue),
			fin AS (DELETE FROM @.wt_assignments a
				WHERE a.id = ANY(ARRAY(SELECT ok.assignment FROM ok WHERE ok.final))
				AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
				RETURNING a.id)
			SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM fin),
				(SELECT count(pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20), '')::text)
					FROM (SELECT DISTINCT ins.queue FROM ins) q);
		END
		$fn$;
		CREATE OR REPLACE FUNCTION @.wt_heartbeats(p_host text, p_ids text[], p_commits text[], p_outs bigint[])
		RETURNS TABLE (o_id text)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		BEGIN
			PERFORM @.wt_refuse_foreign(p_ids, NULL);
			RETURN QUERY UPDATE @.wt_assignments a
			SET hb_n = a.hb_n + 1, hb_at = clock_timestamp(), hb_commit = h.commit,
				hb_output = CASE WHEN h.out = 0 THEN a.hb_output ELSE to_timestamp(h.out / 1e6) END
			FROM unnest(p_ids, p_commits, p_outs) h(id, commit, out)
			WHERE a.id = ANY(p_ids) AND a.id = h.id AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
			RETURNING a.id;
		END
		$fn$;
		` + hostRoundFunction(prefix, noScans) + `;
		REVOKE ALL ON FUNCTION @.wt_refuse_foreign(text[], text[]), @.wt_claim(text, text, int),
			@.wt_host_write(text, text[], text[], bool[]), @.wt_heartbeats(text, text[], text[], bigint[]),
			@.wt_take_commands(text),
			@.wt_host_round(text, text, text[], text[], bool[], text[], text[], bigint[], int) FROM PUBLIC`
}

// hostRoundFunction is wt_host_round: a host's whole round in one call, as
// wt_host_write, wt_heartbeats, wt_take_commands and wt_claim would do it
// one after another in one transaction (same checks, same refusals, same
// effects), in one statement and one function call instead of four. Its
// rows: 'w' once when messages were written (o_seq the count written,
// o_text the count of assignments they finished), 'b' per
// heartbeat kept (o_id), 'c' per command taken (o_seq, o_id the
// assignment, o_kind, o_text the reason), 'a' per claim (o_seq, o_text
// the assignment's body).
func hostRoundFunction(prefix, noScans string) string {
	return `CREATE FUNCTION @.wt_host_round(p_host text, p_queue text, p_ids text[], p_bodies text[], p_finals bool[],
			p_beat_ids text[], p_commits text[], p_outs bigint[], p_limit int)
		RETURNS TABLE (o_what text, o_seq bigint, o_id text, o_kind smallint, o_text text)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		DECLARE
			bad text;
			who text;
			n_written bigint;
			n_finished bigint;
		BEGIN
			IF cardinality(p_ids) > 0 OR cardinality(p_beat_ids) > 0 THEN
				SELECT a.id, a.owner INTO bad, who FROM @.wt_assignments a
					WHERE a.id = ANY(p_ids || p_beat_ids) AND a.state::int = 1 AND a.owner <> session_user LIMIT 1;
				IF bad IS NOT NULL THEN
					RAISE EXCEPTION 'permission denied: assignment % is claimed by role %, not by %', bad, who, session_user
						USING ERRCODE = 'insufficient_privilege';
				END IF;
			END IF;
			IF cardinality(p_ids) > 0 THEN
				SELECT u.id INTO bad FROM unnest(p_ids, p_bodies) u(id, body)
					WHERE u.body IS NOT NULL AND (u.body::jsonb ->> 'Assignment') IS DISTINCT FROM u.id LIMIT 1;
				IF bad IS NOT NULL THEN
					RAISE EXCEPTION 'permission denied: a message written for assignment % names another assignment', bad
						USING ERRCODE = 'insufficient_privilege';
				END IF;
				WITH m AS (
					SELECT u.assignment, u.body, u.final, u.ord
					FROM unnest(p_ids, p_bodies, p_finals) WITH ORDINALITY u(assignment, body, final, ord)),
				mine AS (SELECT a.id, a.queue FROM @.wt_assignments a
					WHERE a.id = ANY(p_ids) AND a.host = p_host AND a.owner = session_user AND a.state::int = 1),
				ok AS (SELECT m.*, mine.queue FROM m JOIN mine ON mine.id = m.assignment),
				ins AS (INSERT INTO @.wt_messages (queue, assignment, body)
					SELECT ok.queue, ok.assignment, ok.body::jsonb FROM ok ORDER BY ok.ord
					RETURNING queue),
				fin AS (DELETE FROM @.wt_assignments a
					WHERE a.id = ANY(ARRAY(SELECT ok.assignment FROM ok WHERE ok.final))
					AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
					RETURNING a.id)
				SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM fin),
					(SELECT count(pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20), '')::text)
						FROM (SELECT DISTINCT ins.queue FROM ins) q)
				INTO n_written, n_finished;
				RETURN QUERY SELECT 'w'::text, n_written, NULL::text, NULL::smallint, n_finished::text;
			END IF;
			IF cardinality(p_beat_ids) > 0 THEN
				RETURN QUERY UPDATE @.wt_assignments a
				SET hb_n = a.hb_n + 1, hb_at = clock_timestamp(), hb_commit = h.commit,
					hb_output = CASE WHEN h.out = 0 THEN a.hb_output ELSE to_timestamp(h.out / 1e6) END
				FROM unnest(p_beat_ids, p_commits, p_outs) h(id, commit, out)
				WHERE a.id = ANY(p_beat_ids) AND a.id = h.id AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
				RETURNING 'b'::text, NULL::bigint, a.id, NULL::smallint, NULL::text;
			END IF;
			RETURN QUERY DELETE FROM @.wt_commands c WHERE c.host = p_host AND c.owner = session_user
				RETURNING 'c'::text, c.seq, c.assignment, c.kind, c.reason;
			IF p_limit > 0 THEN
				RETURN QUERY UPDATE @.wt_assignments a
				SET state = 1, host = p_host, owner = session_user, claimed_at = clock_timestamp(), hb_at = clock_timestamp()
				FROM (SELECT w.id FROM @.wt_assignments w
					WHERE w.queue = p_queue AND w.state = 0 ORDER BY w.seq LIMIT p_limit FOR UPDATE SKIP LOCKED) c
				WHERE a.id = c.id
				RETURNING 'a'::text, a.seq, NULL::text, NULL::smallint, a.body::text;
			END IF;
		END
		$fn$`
}
