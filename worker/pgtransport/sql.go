package pgtransport

// statements is the transport's SQL with the schema filled in.
type statements struct {
	fence, insert, stop, probe, supersede, notify string
	deleteMessages, readMessages, readBeats       string
	hostWrite, heartbeats, takeCommands, claim    string
	release                                       string
}

func newStatements(schema string) statements {
	notifyHosts := `SELECT pg_notify(` + hostChannelSQL(schema, "h.host") + `, '') FROM (SELECT DISTINCT host FROM c) h`
	s := statements{
		// Coordinator writes. Each batch starts with fence, which takes the
		// lease's lock shared and fails (SQLSTATE FM002) unless the lease is
		// still at the coordinator's term; the batch is one transaction, so
		// a fenced coordinator writes nothing.
		fence: `SELECT @.wt_fence($1, $2)`,
		insert: `INSERT INTO @.wt_assignments (id, queue, slot, lease, term, body)
			SELECT u.id, $1, u.slot, $2, $3, u.body::jsonb
			FROM unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY u(id, slot, body, ord)
			ORDER BY u.ord
			ON CONFLICT (id) DO NOTHING`,
		// KILL, RESET, SHUTDOWN: the assignment (or, with no id, every
		// assignment of the slot) stops existing, so no host claims it and
		// no message of it is written any more; a host that claimed it is
		// told to stop its run.
		stop: `WITH d AS (DELETE FROM @.wt_assignments a
				WHERE a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.slot = $4 AND ($5 = '' OR a.id = $5)
				RETURNING a.id, a.host, a.state),
			c AS (INSERT INTO @.wt_commands (host, assignment, kind, reason)
				SELECT d.host, d.id, $6, $7 FROM d WHERE d.state = 1 RETURNING host)
			` + notifyHosts,
		// PROBE reaches the host that claimed the assignment; an open one
		// has nobody to answer, so the probe times out.
		probe: `WITH c AS (INSERT INTO @.wt_commands (host, assignment, kind, reason)
				SELECT a.host, a.id, $5, $6 FROM @.wt_assignments a
				WHERE a.id = $4 AND a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.state = 1
				RETURNING host)
			` + notifyHosts,
		// A new term takes over the queue: the earlier terms' assignments
		// are withdrawn and their runs killed.
		supersede: `WITH d AS (DELETE FROM @.wt_assignments a
				WHERE a.queue = $1 AND a.lease = $2 AND a.term < $3
				RETURNING a.id, a.host, a.state),
			c AS (INSERT INTO @.wt_commands (host, assignment, kind, reason)
				SELECT d.host, d.id, $4, $5 FROM d WHERE d.state = 1 RETURNING host)
			` + notifyHosts,
		notify: `SELECT pg_notify($1, '')`,

		// Coordinator reads: messages are deleted once delivered (in the
		// next round), so a coordinator that dies between delivering and
		// deleting delivers them again to its successor, which fences them
		// off as stale.
		deleteMessages: `DELETE FROM @.wt_messages WHERE seq = ANY($1::bigint[])`,
		readMessages:   `SELECT seq, body FROM @.wt_messages WHERE queue = $1 ORDER BY seq LIMIT $2`,
		readBeats: `SELECT a.id, a.slot, a.hb_n, a.hb_commit, a.hb_output, clock_timestamp()
			FROM @.wt_assignments a
			WHERE a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.state = 1 AND a.hb_n > 0
			AND ($4::timestamptz IS NULL OR a.hb_at > $4::timestamptz)`,

		// Host writes, all joined to the assignment row this host claimed.
		// Messages go in their order; a final one (DONE, FAILED, ...) also
		// deletes the row, in the same statement, which sees the row still
		// there (one snapshot) and so writes the final message once.
		hostWrite: `WITH m AS (
				SELECT u.assignment, u.body, u.final, u.ord
				FROM unnest($2::text[], $3::text[], $4::bool[]) WITH ORDINALITY u(assignment, body, final, ord)),
			ok AS (SELECT m.*, a.queue FROM m JOIN @.wt_assignments a
				ON a.id = m.assignment AND a.host = $1 AND a.state = 1),
			ins AS (INSERT INTO @.wt_messages (queue, assignment, body)
				SELECT ok.queue, ok.assignment, ok.body::jsonb FROM ok ORDER BY ok.ord
				RETURNING queue),
			fin AS (DELETE FROM @.wt_assignments a USING ok
				WHERE ok.final AND a.id = ok.assignment AND a.host = $1 AND a.state = 1
				RETURNING a.id)
			SELECT (SELECT count(*) FROM ins), (SELECT count(*) FROM fin),
				(SELECT count(pg_notify('fm_m_' || left(encode(sha256(convert_to($5::text || q.queue, 'UTF8')), 'hex'), 20), '')::text)
					FROM (SELECT DISTINCT queue FROM ins) q)`,
		// Many runs' heartbeats in one statement; the ids it returns are
		// still this host's, the others were withdrawn (their runs stop).
		heartbeats: `UPDATE @.wt_assignments a
			SET hb_n = a.hb_n + 1, hb_at = clock_timestamp(), hb_commit = h.commit,
				hb_output = CASE WHEN h.out = 0 THEN a.hb_output ELSE to_timestamp(h.out / 1e6) END
			FROM unnest($2::text[], $3::text[], $4::bigint[]) h(id, commit, out)
			WHERE a.id = h.id AND a.host = $1 AND a.state = 1
			RETURNING a.id`,
		takeCommands: `DELETE FROM @.wt_commands WHERE host = $1 RETURNING seq, assignment, kind, reason`,
		// FOR UPDATE SKIP LOCKED: claimers never wait for each other and
		// never take the same row.
		claim: `UPDATE @.wt_assignments a
			SET state = 1, host = $1, claimed_at = clock_timestamp(), hb_at = clock_timestamp()
			FROM (SELECT id FROM @.wt_assignments
				WHERE queue = $2 AND state = 0 ORDER BY seq LIMIT $3 FOR UPDATE SKIP LOCKED) c
			WHERE a.id = c.id
			RETURNING a.seq, a.body`,
		// A host that stops gives back what it claimed and did not start.
		release: `UPDATE @.wt_assignments SET state = 0, host = NULL, claimed_at = NULL, hb_at = NULL
			WHERE id = ANY($2::text[]) AND host = $1 AND state = 1`,
	}
	for _, p := range []*string{&s.fence, &s.insert, &s.stop, &s.probe, &s.supersede, &s.deleteMessages,
		&s.readMessages, &s.readBeats, &s.hostWrite, &s.heartbeats, &s.takeCommands, &s.claim, &s.release} {
		*p = sqlFor(schema, *p)
	}
	return s
}
