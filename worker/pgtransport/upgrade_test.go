package pgtransport_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// Tables an earlier build left at version 2, with work in them (an open
// assignment and one a host of that build claimed and beat for), are
// migrated to this build's version by the next coordinator: the
// heartbeat index goes, and this build's hosts claim, beat for and finish
// the work through wt_host_round.
func TestTablesOfVersion2AreMigratedWithTheirWork(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, pgtransport.MigrateTo(ctx, e.pool, e.store, 2))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	leader := e.lead(t, "coordinator")
	for _, id := range []string{"a1", "a2"} {
		body, err := json.Marshal(assignment(id, "w-"+id).Assign)
		require.NoError(t, err)
		_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ($1, 'default', $2, $3, $4, $5)`,
			id, "w-"+id, leader.Lease(), leader.Term(), string(body))
		require.NoError(t, err)
	}
	var claimed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_claim('old-host', 'default', 1)`).Scan(&claimed))
	require.Equal(t, 1, claimed)
	var beats int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_heartbeats('old-host', ARRAY['a1'], ARRAY[''], ARRAY[0::bigint])`).Scan(&beats))
	require.Equal(t, 1, beats, "the version 2 host beats for its claim")
	index := func() bool {
		var found bool
		require.NoError(t, e.pool.QueryRow(ctx, `SELECT to_regclass($1) IS NOT NULL`, e.schema+".wt_assignments_beat").Scan(&found))
		return found
	}
	require.True(t, index(), "version 2 has the heartbeat index")

	in := newInbox()
	e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: 50 * time.Millisecond}, in)
	var version int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT version FROM `+s+`transport_schema`).Scan(&version))
	assert.Equal(t, pgtransport.SchemaVersion, version)
	assert.False(t, index(), "version 3 and later have no heartbeat index")
	assert.Equal(t, "old-host", claimedBy(t, e, "a1"), "the claim of the version 2 host survives the migration")

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "new-host", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	require.NoError(t, h.Round(ctx))
	require.Equal(t, int64(1), h.Stats().Claimed, "the open assignment of version 2 is claimed")
	assert.Equal(t, "new-host", claimedBy(t, e, "a2"))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	in.await(t, "a2's DONE from the new host", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
	// The old host's claim is still its own: the new host's round does not
	// write for it.
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a1", Assignment: "a1"})
	require.NoError(t, h.Round(ctx))
	assert.Equal(t, "old-host", claimedBy(t, e, "a1"))
	assert.Equal(t, int64(1), h.Stats().Dropped, "a DONE for a claim that is not this host's is not written")
}

// Tables a version 3 build left, with a DONE written as a message row and
// not yet delivered and a claim still running, are migrated to version 4
// by the next coordinator: it delivers the old DONE, and the claim's DONE,
// written by this build's host, goes into the assignment's row.
func TestTablesOfVersion3AreMigratedWithTheirMessages(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, pgtransport.MigrateTo(ctx, e.pool, e.store, 3))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	leader := e.lead(t, "coordinator")
	for _, id := range []string{"a1", "a2"} {
		body, err := json.Marshal(assignment(id, "w-"+id).Assign)
		require.NoError(t, err)
		_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ($1, 'default', $2, $3, $4, $5)`,
			id, "w-"+id, leader.Lease(), leader.Term(), string(body))
		require.NoError(t, err)
	}
	var claimed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_claim('h', 'default', 2)`).Scan(&claimed))
	require.Equal(t, 2, claimed)
	done, err := json.Marshal(worker.Message{Kind: worker.MsgDone, Worker: "w-a1", Assignment: "a1", Reason: "from version 3"})
	require.NoError(t, err)
	var written, finished int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT o_written, o_finished FROM `+s+`wt_host_write('h', ARRAY['a1'], ARRAY[$1], ARRAY[true])`,
		string(done)).Scan(&written, &finished))
	require.Equal(t, []int{1, 1}, []int{written, finished}, "version 3 writes a message row and deletes the assignment")
	state, messages := rowOf(t, e, "a1")
	require.Equal(t, []int{-1, 1}, []int{state, messages})

	in := newInbox()
	e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: 50 * time.Millisecond}, in)
	var version int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT version FROM `+s+`transport_schema`).Scan(&version))
	assert.Equal(t, pgtransport.SchemaVersion, version)
	got := in.await(t, "a1's DONE of version 3", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	assert.Equal(t, "from version 3", got.Reason)
	assert.Equal(t, "h", claimedBy(t, e, "a2"), "the claim survives the migration")

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	state, messages = rowOf(t, e, "a2")
	assert.Equal(t, []int{2, 0}, []int{state, messages}, "version 4 writes the DONE into the assignment's row")
	in.await(t, "a2's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
}

// Tables a version 4 build left, with a DONE written into its finished
// row and not yet delivered and a claim still running, are migrated to
// version 5 (the round in fewer statements) by the next coordinator: it
// delivers the old DONE, and this build's host finishes the claim.
func TestTablesOfVersion4AreMigratedWithTheirFinishedRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, pgtransport.MigrateTo(ctx, e.pool, e.store, 4))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	leader := e.lead(t, "coordinator")
	for _, id := range []string{"a1", "a2"} {
		body, err := json.Marshal(assignment(id, "w-"+id).Assign)
		require.NoError(t, err)
		_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ($1, 'default', $2, $3, $4, $5)`,
			id, "w-"+id, leader.Lease(), leader.Term(), string(body))
		require.NoError(t, err)
	}
	done, err := json.Marshal(worker.Message{Kind: worker.MsgDone, Worker: "w-a1", Assignment: "a1", Reason: "from version 4"})
	require.NoError(t, err)
	var claimed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_host_round('h', 'default', '{}', '{}', '{}', '{}', '{}', '{}', 2)`).Scan(&claimed))
	require.Equal(t, 2, claimed)
	var written int64
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT o_seq FROM `+s+`wt_host_round('h', 'default', ARRAY['a1'], ARRAY[$1], ARRAY[true], '{}', '{}', '{}', 0) WHERE o_what = 'w'`,
		string(done)).Scan(&written))
	require.Equal(t, int64(1), written)
	state, _ := rowOf(t, e, "a1")
	require.Equal(t, 2, state, "version 4 finished the row")

	in := newInbox()
	e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: 50 * time.Millisecond}, in)
	var version int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT version FROM `+s+`transport_schema`).Scan(&version))
	assert.Equal(t, pgtransport.SchemaVersion, version)
	got := in.await(t, "a1's DONE of version 4", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	assert.Equal(t, "from version 4", got.Reason)
	assert.Equal(t, "h", claimedBy(t, e, "a2"), "the claim survives the migration")

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	assert.Equal(t, int64(1), h.Stats().Messages)
	in.await(t, "a2's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
}
