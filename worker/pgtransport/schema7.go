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
// hundreds of dead rows each time.
func doneLog(schema string) string {
	return `CREATE TABLE @.wt_done (
			queue text COLLATE "C" NOT NULL,
			seq   bigserial NOT NULL,
			ids   text[] NOT NULL,
			PRIMARY KEY (queue, seq)
		);
		CREATE FUNCTION @.wt_read_done(p_queue text, p_limit int, p_known bigint[])
		RETURNS TABLE (o_seq bigint, o_done_seq bigint, o_id text, o_body jsonb, o_host text)
		LANGUAGE plpgsql SET search_path = pg_catalog, pg_temp SET enable_seqscan = off AS $fn$
		BEGIN
			RETURN QUERY SELECT d.seq, a.done_seq, a.id, a.done_body, a.host
			FROM (SELECT w.seq, w.ids FROM @.wt_done w
				WHERE w.queue = p_queue AND w.seq <> ALL(coalesce(p_known, '{}')) ORDER BY w.seq LIMIT p_limit) d
			LEFT JOIN LATERAL (SELECT f.done_seq, f.id, f.done_body, f.host FROM @.wt_assignments f
				WHERE f.id = ANY(d.ids) AND f.queue = p_queue AND f.state::int = 2) a ON true;
		END
		$fn$;
		REVOKE ALL ON FUNCTION @.wt_read_done(text, int, bigint[]) FROM PUBLIC;
		` + roundFunction(schema, 7)
}
