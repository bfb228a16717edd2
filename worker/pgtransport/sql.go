package pgtransport

// statements is the transport's SQL with the schema filled in.
type statements struct {
	fence, insert, insertAgain, stop, stopOne  string
	probe                                      string
	supersede, notify                          string
	deleteMessages, readMessages, readBeats    string
	readFinished, readAllFinished, ackFinished string
	readDone                                   string
	hostWrite, heartbeats, takeCommands, claim string
	hostRound, promise                         string
}

func newStatements(schema string) statements {
	notifyHosts := `SELECT pg_notify(` + hostChannelSQL(schema, "h.host") + `, '') FROM (SELECT DISTINCT host FROM c) h`
	s := statements{
		// Coordinator writes. Each batch starts with fence, which takes the
		// lease's lock shared and fails (SQLSTATE FM002) unless the lease is
		// still at the coordinator's term; the batch is one transaction, so
		// a fenced coordinator writes nothing.
		fence: `SELECT @.wt_fence($1, $2)`,
		// A plain INSERT: an assignment id is new (the Dispatcher's ids
		// differ across restarts). Only a write that follows a failed one,
		// whose outcome is unknown, skips the rows that landed
		// (insertAgain): ON CONFLICT makes every row a speculative
		// insertion (an index probe, a lock and a second WAL record a row),
		// which cost PostgreSQL 5-11 µs a row more in a batch of 80.
		insert: `INSERT INTO @.wt_assignments (id, queue, slot, lease, term, body)
			SELECT u.id, $1, u.slot, $2, $3, u.body::jsonb
			FROM unnest($4::text[], $5::text[], $6::text[]) WITH ORDINALITY u(id, slot, body, ord)
			ORDER BY u.ord`,
		insertAgain: `INSERT INTO @.wt_assignments (id, queue, slot, lease, term, body)
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
				AND a.state <> 2
				RETURNING a.id, a.host, a.owner, a.state),
			c AS (INSERT INTO @.wt_commands (host, owner, assignment, kind, reason)
				SELECT d.host, d.owner, d.id, $6, $7 FROM d WHERE d.state = 1 RETURNING host)
			` + notifyHosts,
		// The same for a named assignment, found by its primary key (the
		// statement above, planned once for both cases, scans the table).
		stopOne: `WITH d AS (DELETE FROM @.wt_assignments a
				WHERE a.id = $5 AND a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.slot = $4
				AND a.state <> 2
				RETURNING a.id, a.host, a.owner, a.state),
			c AS (INSERT INTO @.wt_commands (host, owner, assignment, kind, reason)
				SELECT d.host, d.owner, d.id, $6, $7 FROM d WHERE d.state = 1 RETURNING host)
			` + notifyHosts,
		// PROBE reaches the host that claimed the assignment; an open one
		// has nobody to answer, so the probe times out.
		probe: `WITH c AS (INSERT INTO @.wt_commands (host, owner, assignment, kind, reason)
				SELECT a.host, a.owner, a.id, $5, $6 FROM @.wt_assignments a
				WHERE a.id = $4 AND a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.state = 1
				RETURNING host)
			` + notifyHosts,
		// A new term takes over the queue: the earlier terms' assignments
		// are withdrawn and their runs killed.
		supersede: `WITH d AS (DELETE FROM @.wt_assignments a
				WHERE a.queue = $1 AND a.lease = $2 AND a.term < $3 AND a.state <> 2
				RETURNING a.id, a.host, a.owner, a.state),
			c AS (INSERT INTO @.wt_commands (host, owner, assignment, kind, reason)
				SELECT d.host, d.owner, d.id, $4, $5 FROM d WHERE d.state = 1 RETURNING host)
			` + notifyHosts,
		notify: `SELECT pg_notify($1, '')`,
		// The coordinator's promise to poll the queue for $2 microseconds
		// from now (pollPromise), in the transaction of a write.
		promise: `INSERT INTO @.wt_polls AS p (queue, until) VALUES ($1, clock_timestamp() + $2::bigint * interval '1 microsecond')
			ON CONFLICT (queue) DO UPDATE SET until = greatest(p.until, excluded.until)`,

		// Coordinator reads: messages, and final messages in their
		// finished assignment rows (state 2), in one order (done_seq comes
		// from the messages' sequence), are deleted once delivered (in the
		// next round), so a coordinator that dies between delivering and
		// deleting delivers them again to its successor, which fences them
		// off as stale. Finished rows have no index of their own (so that
		// finishing one is a HOT update): the coordinator reads those its
		// notifications named by id, and all of its queue's at every poll
		// (and when a notification may have been lost).
		deleteMessages: `WITH m AS (DELETE FROM @.wt_messages WHERE seq = ANY($1::bigint[])),
			d AS (DELETE FROM @.wt_done WHERE queue = $3 AND seq = ANY($4::bigint[]))
			DELETE FROM @.wt_assignments a WHERE a.id = ANY($2::text[]) AND a.state::int = 2`,
		// Finished rows delivered are deleted by the coordinator's next
		// write (its transaction carries them: no commit of their own),
		// or by the next read that reads all finished rows.
		// With them, the wt_done rows read (doneLog).
		ackFinished: `WITH d AS (DELETE FROM @.wt_done WHERE queue = $2 AND seq = ANY($3::bigint[]))
			DELETE FROM @.wt_assignments a WHERE a.id = ANY($1::text[]) AND a.state::int = 2`,
		readMessages: `SELECT seq, assignment, body FROM @.wt_messages WHERE queue = $1 ORDER BY seq LIMIT $2`,
		readFinished: `SELECT a.done_seq, a.id, a.done_body, a.host FROM @.wt_assignments a
			WHERE a.id = ANY($1::text[]) AND a.queue = $2 AND a.state::int = 2`,
		// The finished rows that hosts' rounds within a promise to poll
		// recorded in wt_done (doneLog), each wt_done row with the rows it
		// names that are still there (none: they were delivered and
		// deleted), found by primary key.
		readDone: `SELECT o_seq, o_done_seq, o_id, o_body, o_host FROM @.wt_read_done($1, $2, $3)`,
		readAllFinished: `SELECT a.done_seq, a.id, a.done_body, a.host FROM @.wt_assignments a
			WHERE a.queue = $1 AND a.state = 2 ORDER BY a.done_seq LIMIT $2`,
		readBeats: `SELECT a.id, a.slot, a.hb_n, a.hb_commit, a.hb_output, clock_timestamp()
			FROM @.wt_assignments a
			WHERE a.queue = $1 AND a.lease = $2 AND a.term = $3 AND a.state = 1 AND a.hb_n > 0
			AND ($4::timestamptz IS NULL OR a.hb_at > $4::timestamptz)`,

		// Host calls: the SECURITY DEFINER functions of hostFunctions,
		// each joined to the assignment rows this host's name and role
		// claimed. Messages go in their order; a final one (DONE, FAILED,
		// ...) also deletes the row, in the same statement, which sees the
		// row still there (one snapshot) and so writes the final message
		// once. Heartbeats return the ids still this host's; the others
		// were withdrawn (their runs stop). Claims take open rows FOR
		// UPDATE SKIP LOCKED: claimers never wait for each other and never
		// take the same row.
		hostWrite:    `SELECT o_written, o_finished, o_notified FROM @.wt_host_write($1, $2, $3, $4)`,
		heartbeats:   `SELECT o_id FROM @.wt_heartbeats($1, $2, $3, $4)`,
		takeCommands: `SELECT o_seq, o_assignment, o_kind, o_reason FROM @.wt_take_commands($1)`,
		claim:        `SELECT o_seq, o_body FROM @.wt_claim($1, $2, $3)`,
		// A host's round in one call: the four above in that order.
		hostRound: `SELECT o_what, o_seq, o_id, o_kind, o_text FROM @.wt_host_round($1, $2, $3, $4, $5, $6, $7, $8, $9)`,
	}
	for _, p := range []*string{&s.fence, &s.insert, &s.insertAgain, &s.stop, &s.stopOne, &s.probe, &s.supersede, &s.deleteMessages,
		&s.readMessages, &s.readFinished, &s.ackFinished, &s.readDone, &s.readAllFinished, &s.readBeats, &s.hostWrite, &s.heartbeats, &s.takeCommands, &s.claim, &s.hostRound, &s.promise} {
		*p = sqlFor(schema, *p)
	}
	return s
}
