package pgtransport

// doneLog is migration 6 -> 7: within a coordinator's promise to poll
// (pollPromise), a host's round records the ids of the rows it finished
// in one wt_done row per queue, in the statement that finishes them, and
// the coordinator's polls read those rows (one index range scan) and the
// finished rows they name, instead of looking up every assignment it has
// out by id at every poll: a poll costs what finished since the last one,
// not what is out. So the promise no longer needs a bound on how many are
// out, and a coordinator at full tilt (a thousand or more out) is spared
// the hosts' notifications too. The coordinator deletes the wt_done rows
// it read in the transaction of its next write, with the finished rows it
// delivered (or in its next read of every finished row); a row read twice
// names finished rows already delivered, which it skips, or already
// deleted, which it no longer finds. Outside a promise a round notifies
// as in version 6, its notification naming the rows. Only the host
// functions (as their owner) write wt_done. The coordinator reads it
// through wt_read_done, whose plan may not scan the assignment table: a
// plan made while the table looked small did, once for each wt_done row,
// hundreds of dead rows each time; it looks the ids of every wt_done row
// read up in one index scan.
//
// wt_done is a hint, as a notification is, not the record: the finished
// rows are, and the coordinator reads every one of them at start, on
// every reconnection and at every PollInterval. So it is UNLOGGED (no
// WAL for its rows: a crash of the database empties it, and the
// coordinator, whose connections the crash broke, reads every finished
// row), and its sequence is the messages' (logged: a number is never
// drawn twice, crash or not, so a row the coordinator read before a crash
// is never confused with a later one).
func doneLog(schema string) string {
	return `CREATE UNLOGGED TABLE @.wt_done (
			queue text COLLATE "C" NOT NULL,
			seq   bigint NOT NULL DEFAULT nextval('@.wt_messages_seq_seq'),
			ids   text[] NOT NULL,
			PRIMARY KEY (queue, seq)
		);
		CREATE FUNCTION @.wt_read_done(p_queue text, p_limit int, p_known bigint[])
		RETURNS TABLE (o_seq bigint, o_done_seq bigint, o_id text, o_body jsonb, o_host text)
		LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $fn$
		DECLARE
			seqs bigint[];
			ids text[];
		BEGIN
			SELECT array_agg(d.seq), array_agg(u.id) INTO seqs, ids
			FROM (SELECT w.seq, w.ids FROM @.wt_done w
				WHERE w.queue = p_queue AND w.seq <> ALL(coalesce(p_known, '{}')) ORDER BY w.seq LIMIT p_limit) d
			LEFT JOIN LATERAL unnest(d.ids) u(id) ON true;
			IF seqs IS NULL THEN
				RETURN;
			END IF;
			RETURN QUERY SELECT DISTINCT s.seq, NULL::bigint, NULL::text, NULL::jsonb, NULL::text FROM unnest(seqs) s(seq);
			RETURN QUERY SELECT NULL::bigint, f.done_seq, f.id, f.done_body, f.host FROM @.wt_assignments f
				WHERE f.id = ANY(ids) AND f.queue = p_queue AND f.state::int = 2;
		END
		$fn$;
		REVOKE ALL ON FUNCTION @.wt_read_done(text, int, bigint[]) FROM PUBLIC;
		` + roundFunction(schema, 7)
}
