package pgtransport_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
	"github.com/agentforeman/foreman/worker/transporttest"
)

// Worker hosts that log in with roles of their own, granted nothing but
// the host's functions, pass the conformance suite: they claim, beat,
// answer probes, obey kills and complete as the coordinators' role does.
func TestConformanceWithWorkerRoles(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, agent phases.AgentDriver, inbox worker.Inbox) worker.Transport {
		e := newEnv(t)
		c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 100 * time.Millisecond}, inbox)
		for range 2 {
			pool, _ := e.workerRole(t)
			e.host(t, pgtransport.HostConfig{Pool: pool, Capacity: 4, PollInterval: 100 * time.Millisecond, Runtime: worker.RuntimeConfig{Agent: agent}})
		}
		return c
	})
}

// requireRefused asserts that PostgreSQL refused a statement for want of
// privilege (SQLSTATE 42501).
func requireRefused(t *testing.T, err error, what string) {
	t.Helper()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, "%s was not refused", what)
	assert.Equal(t, "42501", pe.Code, "%s: refused, but not for privilege: %v", what, err)
}

// A hostile process on a worker host, with the host's database role: every
// write beyond its own claims is refused with a permission error, and the
// other host's claim, the leader's lease and the schema are untouched.
func TestAWorkerRoleCanWriteNothingButItsOwnClaims(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	leader := e.lead(t, "coordinator")
	c := e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: 50 * time.Millisecond}, in)
	goodPool, _ := e.workerRole(t)
	evilPool, evilRole := e.workerRole(t)
	good, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: goodPool, Schema: e.schema, Name: "good", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, good.Round(ctx))
	require.Equal(t, "good", claimedBy(t, e, "a1"))

	q := func(sql string, args ...any) error {
		rows, err := evilPool.Query(ctx, sql, args...)
		if err != nil {
			return err
		}
		rows.Close()
		return rows.Err()
	}
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	done := `{"Kind": 3, "Worker": "w1", "Assignment": "a1"}` // MsgDone
	for _, a := range []struct{ what, sql string }{
		{"taking another host's claim", `UPDATE ` + s + `wt_assignments SET host = 'evil'`},
		{"withdrawing an assignment", `DELETE FROM ` + s + `wt_assignments`},
		{"reading the queue", `SELECT body FROM ` + s + `wt_assignments`},
		{"writing a message directly", `INSERT INTO ` + s + `wt_messages (queue, assignment, body) VALUES ('default', 'a1', '` + done + `')`},
		{"reading the messages", `SELECT body FROM ` + s + `wt_messages`},
		{"taking the commands directly", `DELETE FROM ` + s + `wt_commands`},
		{"writing DONE for another host's claim", `SELECT * FROM ` + s + `wt_host_write('good', ARRAY['a1'], ARRAY['` + done + `'], ARRAY[true])`},
		{"beating for another host's claim", `SELECT * FROM ` + s + `wt_heartbeats('good', ARRAY['a1'], ARRAY['c0ffee'], ARRAY[0::bigint])`},
		{"writing DONE for another host's claim in a round", `SELECT * FROM ` + s + `wt_host_round('good', 'default', ARRAY['a1'], ARRAY['` + done + `'], ARRAY[true], '{}', '{}', '{}', 0)`},
		{"beating for another host's claim in a round", `SELECT * FROM ` + s + `wt_host_round('good', 'default', '{}', '{}', '{}', ARRAY['a1'], ARRAY['c0ffee'], ARRAY[0::bigint], 0)`},
		{"writing DONE for another host's claim beside a round's claims", `SELECT * FROM ` + s + `wt_host_round('evil', 'default', ARRAY['a1'], ARRAY['` + done + `'], ARRAY[true], '{}', '{}', '{}', 5)`},
		{"writing a record", `INSERT INTO ` + s + `records (kind, id, version, data, updated_at) VALUES ('team.story', 'x', 1, '', now())`},
		{"changing a record", `UPDATE ` + s + `records SET data = ''`},
		{"reading the records", `SELECT data FROM ` + s + `records`},
		{"writing through the store's function", `SELECT * FROM ` + s + `apply_batch(now(), ARRAY[1], ARRAY['team.story'], ARRAY['x'], ARRAY[0::bigint], ARRAY[''::bytea], ARRAY[false], ARRAY[''], ARRAY[0::bigint])`},
		{"raising the lease's term", `UPDATE ` + s + `leases SET term = term + 1`},
		{"taking the lease", `INSERT INTO ` + s + `leases (name, holder, term, expires_at, acquired_at) VALUES ('evil', 'evil', 1, now(), now())`},
		{"passing the coordinator's fence", `SELECT ` + s + `wt_fence('', 1)`},
		{"creating a table", `CREATE TABLE ` + s + `evil (x int)`},
		{"dropping a table", `DROP TABLE ` + s + `wt_messages`},
		{"altering a table", `ALTER TABLE ` + s + `records ADD COLUMN evil int`},
		{"truncating the records", `TRUNCATE ` + s + `records`},
		{"replacing a host function", `CREATE OR REPLACE FUNCTION ` + s + `wt_take_commands(p_host text) RETURNS TABLE (o_seq bigint, o_assignment text, o_kind smallint, o_reason text) LANGUAGE sql AS 'SELECT 1::bigint, ''x'', 1::smallint, ''x'''`},
		{"making a host function run as the caller", `ALTER FUNCTION ` + s + `wt_claim(text, text, int) SECURITY INVOKER`},
		{"calling the functions' own check", `SELECT ` + s + `wt_refuse_foreign(ARRAY['a1'], NULL)`},
	} {
		requireRefused(t, q(a.sql), a.what)
	}
	_, err = evilPool.Exec(ctx, `SET ROLE postgres`)
	assert.Error(t, err, "the worker role cannot become another")
	evilStore, err := pgstore.OpenPool(ctx, evilPool, pgstore.Options{Schema: e.schema})
	require.NoError(t, err, "a worker role opens the store (reads its version)")
	defer evilStore.Close()
	_, err = evilStore.TryLead(ctx, pgstore.LeaseOptions{Holder: "evil", TTL: time.Minute})
	requireRefused(t, err, "campaigning for the lease")

	// Its own claims it may act on, but not to speak for another assignment.
	require.NoError(t, c.Send(ctx, assignment("a2", "w2")))
	require.NoError(t, c.Flush(ctx))
	var seq int64
	require.NoError(t, evilPool.QueryRow(ctx, `SELECT o_seq FROM `+s+`wt_claim('evil', 'default', 1)`).Scan(&seq))
	require.Equal(t, "evil", claimedBy(t, e, "a2"))
	requireRefused(t, q(`SELECT * FROM `+s+`wt_host_write('evil', ARRAY['a2'], ARRAY['`+done+`'], ARRAY[true])`),
		"writing another assignment's DONE under its own claim")
	requireRefused(t, q(`SELECT * FROM `+s+`wt_host_round('evil', 'default', ARRAY['a2'], ARRAY['`+done+`'], ARRAY[true], '{}', '{}', '{}', 0)`),
		"writing another assignment's DONE under its own claim in a round")
	// Naming the other host cannot reach its commands either.
	require.NoError(t, c.Send(ctx, worker.Command{Kind: worker.CommandProbe, Worker: "w1", Assignment: "a1"}))
	require.NoError(t, c.Flush(ctx))
	var taken int
	require.NoError(t, evilPool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_take_commands('good')`).Scan(&taken))
	assert.Zero(t, taken, "another role's commands are not its to take")
	require.NoError(t, evilPool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_host_round('good', 'default', '{}', '{}', '{}', '{}', '{}', '{}', 0)`).Scan(&taken))
	assert.Zero(t, taken, "another role's commands are not its to take in a round either")

	// The honest host's claim, its command and its lease are untouched.
	assert.Equal(t, "good", claimedBy(t, e, "a1"))
	require.NoError(t, good.Round(ctx))
	assert.Equal(t, int64(1), good.Stats().Commands, "the probe reached the host it was for")
	lease, found, err := e.store.ReadLease(ctx, leader.Lease())
	require.NoError(t, err)
	require.True(t, found)
	assert.Equal(t, leader.Term(), lease.Term)
	good.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, good.Round(ctx))
	in.await(t, "the honest host's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	for _, m := range in.all() {
		assert.NotEqual(t, "a2", string(m.Assignment), "nothing of the hostile writes was delivered: %+v", m)
	}

	require.NoError(t, pgtransport.CheckWorker(ctx, evilPool, e.schema, ""), "the worker role holds nothing more")
	assert.NoError(t, pgtransport.CheckWorker(ctx, e.pool, e.schema, evilRole))
}

// A message written for one claim that names another assignment is
// dropped by the coordinator too, should a role with table access (the
// coordinators') write one.
func TestAMessageNamingAnotherAssignmentIsDropped(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 50 * time.Millisecond}, in)
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	_, err := e.pool.Exec(ctx, `INSERT INTO `+s+`wt_messages (queue, assignment, body) VALUES
		('default', 'a1', '{"Kind": 3, "Worker": "w2", "Assignment": "a2"}'),
		('default', 'a3', '{"Kind": 2, "Worker": "w3", "Assignment": "a3", "Status": "running"}')`) // DONE, STATUS
	require.NoError(t, err)
	in.await(t, "a3's STATUS", func(m worker.Message) bool { return m.Assignment == "a3" })
	for _, m := range in.all() {
		assert.NotEqual(t, "a2", string(m.Assignment), "the forged DONE was delivered: %+v", m)
	}
}

// GrantWorker names what is wrong: no such role, a bad name, or a role
// that can already do more (the coordinators' own, a superuser).
func TestGrantWorkerRefusesRolesThatCannotBeRestricted(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	var own string
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT current_user`).Scan(&own))
	err := pgtransport.GrantWorker(ctx, e.pool, e.schema, own)
	var pe *pgstore.PrivilegeError
	require.ErrorAs(t, err, &pe)
	assert.ErrorIs(t, err, pgstore.ErrPrivileged)
	assert.Contains(t, pe.Held, "UPDATE on leases")
	assert.Contains(t, pe.Held, "CREATE on the schema")
	assert.ErrorIs(t, pgtransport.CheckWorker(ctx, e.pool, e.schema, ""), pgstore.ErrPrivileged,
		"a host can tell it was given the coordinators' role")

	assert.ErrorIs(t, pgtransport.GrantWorker(ctx, e.pool, e.schema, "no_such_role_here"), pgstore.ErrNoRole)
	assert.ErrorIs(t, pgtransport.GrantWorker(ctx, e.pool, e.schema, ""), pgstore.ErrInvalidOptions)
	assert.ErrorIs(t, pgtransport.GrantWorker(ctx, e.pool, "Not-A-Schema", "x"), pgstore.ErrInvalidSchemaName)
	assert.ErrorIs(t, pgtransport.GrantWorker(ctx, (*pgxpool.Pool)(nil), e.schema, "x"), pgtransport.ErrInvalidConfig)
}
