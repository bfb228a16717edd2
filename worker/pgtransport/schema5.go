package pgtransport

import "strings"

// leanRound is migration 4 -> 5: wt_host_round with the same arguments,
// checks, refusals and effects, in fewer statements. Version 4 ran up to
// nine statements a round (each with its executor start-up): a check that
// no id names another role's claim, a check that every message names its
// own assignment, one that split the final messages from the others, the
// finishing UPDATE, the heartbeats, the commands and the claims.
//
// Now the common round (final messages, heartbeats, commands, claims)
// runs four: the final messages are split from the others by a PL/pgSQL
// loop (no statement), the finishing UPDATE itself tells whether a
// message names another assignment than the row it finishes (its
// RETURNING compares the two, and the round is refused with SQLSTATE
// 42501, so the transaction writes nothing), and the check for another
// role's claims runs only when the UPDATE (or the heartbeats' UPDATE)
// wrote fewer rows than it was given: a row this host's name and role
// holds is written, so only then can one of the ids be another role's.
// A refusal still undoes the whole round: the exception aborts the one
// statement that is the round. Messages that are not final (a probe's
// answer, a gate's result) take version 4's path, every check first.
func leanRound(schema string) string {
	return roundFunction(schema, 5)
}

// roundFunction is wt_host_round as version 5 has it, as version 6 has
// it (pollPromise: the same but for the notification of the finished
// rows, sent only when no coordinator's promise to poll their queue
// holds) or as version 7 has it (doneLog: the ids of the rows a round
// finishes within a promise go into one wt_done row).
func roundFunction(schema string, version int) string {
	watched := version >= 6
	prefix := "'" + strings.ReplaceAll(schema+"/", "'", "''") + "'"
	// Version 5 notifies the coordinator of every finished row; version 6
	// only when no coordinator's promise to poll their queue holds (its
	// 'w' row tells how many notifications went),
	notify, end := "", ""
	written := `RETURN QUERY SELECT 'w'::text, n_written + n_finished, NULL::text, NULL::smallint, n_finished::text;`
	// and it spends fewer statements and expressions on a round's usual
	// messages, all final: no loop to split them, and no query for its
	// 'w' row.
	split, splitEnd := "", ""
	if watched {
		notify = "CASE WHEN NOT EXISTS (SELECT FROM @.wt_polls p WHERE p.queue = q.queue AND p.until > clock_timestamp()) THEN "
		end = " END"
		written = `o_what := 'w'; o_seq := n_written + n_finished; o_id := NULL; o_kind := least(n_notified, 32767);
				o_text := n_finished::text;
				RETURN NEXT;`
		split = `IF (true = ALL(p_finals)) IS TRUE AND cardinality(p_finals) = cardinality(p_ids) AND cardinality(p_bodies) = cardinality(p_ids) THEN
					f_ids := p_ids;
					f_bodies := p_bodies;
				ELSE
				`
		splitEnd = `
				END IF;`
	}
	// The finished rows per queue (q), and in version 7 their ids in one
	// wt_done row per queue whose promise holds (doneLog), in the
	// statement that finishes them.
	finished := `q AS (SELECT up.queue, count(*) AS n, json_agg(up.id)::text AS ids,
						min(up.id) FILTER (WHERE up.named_other) AS bad FROM up GROUP BY up.queue)`
	if version >= 7 {
		finished = `g AS (SELECT up.queue, count(*) AS n, array_agg(up.id) AS ids,
						min(up.id) FILTER (WHERE up.named_other) AS bad,
						EXISTS (SELECT FROM @.wt_polls p WHERE p.queue = up.queue AND p.until > clock_timestamp()) AS watched
						FROM up GROUP BY up.queue),
					d AS (INSERT INTO @.wt_done (queue, ids) SELECT g.queue, g.ids FROM g WHERE g.watched),
					q AS (SELECT g.queue, g.n, g.bad, g.watched, CASE WHEN g.watched THEN '' ELSE array_to_json(g.ids)::text END AS ids FROM g)`
		notify, end = "CASE WHEN NOT q.watched THEN ", " END"
	}
	const noScans = `SET search_path = pg_catalog, pg_temp SET enable_seqscan = off`
	return `CREATE OR REPLACE FUNCTION @.wt_host_round(p_host text, p_queue text, p_ids text[], p_bodies text[], p_finals bool[],
			p_beat_ids text[], p_commits text[], p_outs bigint[], p_limit int)
		RETURNS TABLE (o_what text, o_seq bigint, o_id text, o_kind smallint, o_text text)
		LANGUAGE plpgsql SECURITY DEFINER ` + noScans + ` AS $fn$
		DECLARE
			bad text;
			who text;
			n_written bigint := 0;
			n_finished bigint := 0;
			n_notified bigint := 0;
			n_beats bigint := 0;
			f_ids text[];
			f_bodies text[];
			others boolean := false;
		BEGIN
			IF cardinality(p_ids) > 0 THEN
				` + split + `FOR i IN 1 .. cardinality(p_ids) LOOP
					IF p_finals[i] THEN
						f_ids := f_ids || p_ids[i];
						f_bodies := f_bodies || p_bodies[i];
					ELSE
						others := true;
					END IF;
				END LOOP;` + splitEnd + `
				IF others THEN
					PERFORM @.wt_refuse_foreign(p_ids || p_beat_ids, NULL);
					SELECT u.id INTO bad FROM unnest(p_ids, p_bodies) u(id, body)
						WHERE u.body IS NOT NULL AND (u.body::jsonb ->> 'Assignment') IS DISTINCT FROM u.id LIMIT 1;
					IF bad IS NOT NULL THEN
						RAISE EXCEPTION 'permission denied: a message written for assignment % names another assignment', bad
							USING ERRCODE = 'insufficient_privilege';
					END IF;
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
				IF f_ids IS NOT NULL THEN
					WITH up AS (UPDATE @.wt_assignments a
						SET state = 2, done_seq = nextval('@.wt_messages_seq_seq'),
							done_body = f_bodies[array_position(f_ids, a.id)]::jsonb, body = 'null'::jsonb
						WHERE a.id = ANY(f_ids) AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
						RETURNING a.queue, a.id, (a.done_body ->> 'Assignment') IS DISTINCT FROM a.id AS named_other),
					` + finished + `
					SELECT coalesce(sum(q.n), 0), n_notified + count(` + notify + `pg_notify('fm_m_' || left(encode(sha256(convert_to(` + prefix + ` || q.queue, 'UTF8')), 'hex'), 20),
						CASE WHEN octet_length(q.ids) < 7900 THEN q.ids ELSE '' END)::text` + end + `), min(q.bad)
					INTO n_finished, n_notified, bad FROM q;
					IF bad IS NOT NULL THEN
						RAISE EXCEPTION 'permission denied: a message written for assignment % names another assignment', bad
							USING ERRCODE = 'insufficient_privilege';
					END IF;
					IF n_finished < cardinality(f_ids) THEN
						PERFORM @.wt_refuse_foreign(f_ids, NULL);
					END IF;
				END IF;
				` + written + `
			END IF;
			IF cardinality(p_beat_ids) > 0 THEN
				RETURN QUERY UPDATE @.wt_assignments a
				SET hb_n = a.hb_n + 1, hb_at = clock_timestamp(), hb_commit = h.commit,
					hb_output = CASE WHEN h.out = 0 THEN a.hb_output ELSE to_timestamp(h.out / 1e6) END
				FROM unnest(p_beat_ids, p_commits, p_outs) h(id, commit, out)
				WHERE a.id = ANY(p_beat_ids) AND a.id = h.id AND a.host = p_host AND a.owner = session_user AND a.state::int = 1
				RETURNING 'b'::text, NULL::bigint, a.id, NULL::smallint, NULL::text;
				GET DIAGNOSTICS n_beats = ROW_COUNT;
				IF n_beats < cardinality(p_beat_ids) THEN
					PERFORM @.wt_refuse_foreign(p_beat_ids, NULL);
				END IF;
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
