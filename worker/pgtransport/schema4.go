package pgtransport

import "strings"

// finalInRow is migration 3 -> 4: a run's final message (DONE, FAILED,
// READY_FOR_REVIEW, RATE_LIMITED, NEEDS_PERSON) is written into its
// assignment's own row instead of a message row inserted beside it and
// the assignment row deleted. The host's write turns the row it holds
// (claimed by its name and role, state 1) into state 2, finished, with
// the message in done_body and its place in the queue's order in done_seq
// (drawn from the messages' sequence, so the coordinator delivers
// messages and final messages in one order); the coordinator deletes the
// row once it delivered the message. A hand-off so inserts a row, updates
// it twice (claim, finish) and deletes it, where version 3 also inserted
// and deleted a message row.
//
// Finishing is a HOT update: it changes no indexed column. Finished rows
// have no index of their own, and the open index's predicate becomes
// host IS NULL (which the claim changes, as it changed state before), not
// state. The coordinator finds finished rows by id, from the payload of
// the host's notification (a JSON array of the ids, or an empty payload when the list
// would not fit, which asks for a full look), and reads all of its
// queue's finished rows at every poll, at start and whenever its LISTEN
// connection was (re)made, so a lost notification costs at most one
// PollInterval, as before.
//
// The fence is the same: the finishing UPDATE names the row claimed by
// the host's name and role in state 1, so a stale host, one whose claim
// was withdrawn, or a second final message writes nothing; once finished,
// the row takes no more messages, heartbeats, probes or stops (KILL,
// RESET and SHUTDOWN leave a finished row for the coordinator to
// deliver, as version 3 left a written message), and a new term's
// coordinator delivers an earlier term's finished rows as it delivered
// their messages (its Dispatcher fences them off as stale). The finished
// row drops the assignment's body (no one reads it again), so its new
// version is small and fits the page. Messages that version 3 hosts left
// in wt_messages are still read, in the same order.
func finalInRow(schema string) string {
	prefix := "'" + strings.ReplaceAll(schema+"/", "'", "''") + "'"
	const noScans = `SET search_path = pg_catalog, pg_temp SET enable_seqscan = off`
	return `ALTER TABLE @.wt_assignments DROP CONSTRAINT wt_assignments_state_check,
			ADD CONSTRAINT wt_assignments_state_check CHECK (state IN (0, 1, 2)),
			ADD COLUMN done_seq bigint, ADD COLUMN done_body jsonb;
		DROP INDEX @.wt_assignments_open;
		CREATE INDEX wt_assignments_open ON @.wt_assignments (queue, seq) WHERE host IS NULL;
		CREATE OR REPLACE FUNCTION @.wt_claim(p_host text, p_queue text, p_limit int)
		RETURNS TABLE (o_seq bigint, o_body jsonb)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		BEGIN
			RETURN QUERY UPDATE @.wt_assignments a
			SET state = 1, host = p_host, owner = session_user, claimed_at = clock_timestamp(), hb_at = clock_timestamp()
			FROM (SELECT w.id FROM @.wt_assignments w
				WHERE w.queue = p_queue AND w.host IS NULL AND w.state = 0 ORDER BY w.seq LIMIT p_limit FOR UPDATE SKIP LOCKED) c
			WHERE a.id = c.id
			RETURNING a.seq, a.body;
		END
		$fn$;
		CREATE OR REPLACE FUNCTION @.wt_host_write(p_host text, p_ids text[], p_bodies text[], p_finals bool[])
		RETURNS TABLE (o_written bigint, o_finished bigint, o_notified bigint)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		DECLARE
			n_written bigint := 0;
			n_finished bigint := 0;
			n_notified bigint := 0;
			f_ids text[];
			f_bodies text[];
		BEGIN
			PERFORM @.wt_refuse_foreign(p_ids, p_bodies);
			` + writeInRow(prefix) + `
			RETURN QUERY SELECT n_written + n_finished, n_finished, n_notified;
		END
		$fn$;
		CREATE OR REPLACE FUNCTION @.wt_host_round(p_host text, p_queue text, p_ids text[], p_bodies text[], p_finals bool[],
			p_beat_ids text[], p_commits text[], p_outs bigint[], p_limit int)
		RETURNS TABLE (o_what text, o_seq bigint, o_id text, o_kind smallint, o_text text)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		DECLARE
			bad text;
			who text;
			n_written bigint := 0;
			n_finished bigint := 0;
			n_notified bigint := 0;
			f_ids text[];
			f_bodies text[];
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
				` + writeInRow(prefix) + `
				RETURN QUERY SELECT 'w'::text, n_written + n_finished, NULL::text, NULL::smallint, n_finished::text;
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
					WHERE w.queue = p_queue AND w.host IS NULL AND w.state = 0 ORDER BY w.seq LIMIT p_limit FOR UPDATE SKIP LOCKED) c
				WHERE a.id = c.id
				RETURNING 'a'::text, a.seq, NULL::text, NULL::smallint, a.body::text;
			END IF;
		END
		$fn$`
}

// writeInRow is the PL/pgSQL that writes a host's messages (p_ids,
// p_bodies, p_finals) for the rows its name (p_host) and role hold:
// messages that are not final go into wt_messages in their order (the
// statement sees the rows still claimed); then each finished
// assignment's final message goes into its row, which turns finished in
// the same UPDATE that checks the claim (so a final message is written
// once, and never for a row that is not this host's any more: of two
// final messages for one row in one call, one is written, and this
// build's hosts send only the first). Each
// statement notifies the coordinator of each queue it wrote to (one
// transaction's equal notifications are one). It sets n_written
// (messages inserted), n_finished (rows finished) and n_notified.
func writeInRow(prefix string) string {
	return `IF false = ANY(p_finals) THEN
				WITH m AS (
					SELECT u.assignment, u.body, u.ord
					FROM unnest(p_ids, p_bodies, p_finals) WITH ORDINALITY u(assignment, body, final, ord) WHERE NOT u.final),
				mine AS (SELECT a.id, a.queue FROM @.wt_assignments a
					WHERE a.id = ANY(p_ids) AND a.host = p_host AND a.owner = session_user AND a.state::int = 1),
				ins AS (INSERT INTO @.wt_messages (queue, assignment, body)
					SELECT mine.queue, m.assignment, m.body::jsonb FROM m JOIN mine ON mine.id = m.assignment ORDER BY m.ord
					RETURNING queue),
				q AS (SELECT ins.queue, count(*) AS n FROM ins GROUP BY ins.queue)
				SELECT coalesce(sum(q.n), 0), count(pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20), '[]')::text)
				INTO n_written, n_notified FROM q;
			END IF;
			IF true = ANY(p_finals) THEN
				SELECT array_agg(u.id ORDER BY u.ord), array_agg(u.body ORDER BY u.ord) INTO f_ids, f_bodies
					FROM unnest(p_ids, p_bodies, p_finals) WITH ORDINALITY u(id, body, final, ord) WHERE u.final;
				WITH up AS (UPDATE @.wt_assignments a
					SET state = 2, done_seq = nextval('@.wt_messages_seq_seq'),
						done_body = f_bodies[array_position(f_ids, a.id)]::jsonb, body = 'null'::jsonb
					WHERE a.id = ANY(f_ids) AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
					RETURNING a.queue, a.id),
				q AS (SELECT up.queue, count(*) AS n, json_agg(up.id)::text AS ids FROM up GROUP BY up.queue)
				SELECT coalesce(sum(q.n), 0), n_notified + count(pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20),
					CASE WHEN octet_length(q.ids) < 7900 THEN q.ids ELSE '' END)::text)
				INTO n_finished, n_notified FROM q;
			END IF;`
}
