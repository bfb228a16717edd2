package pgtransport_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// doneRows counts the wt_done rows of the env's schema.
func doneRows(t *testing.T, e *env) int {
	t.Helper()
	var n int
	require.NoError(t, e.pool.QueryRow(context.Background(), `SELECT count(*) FROM `+pgx.Identifier{e.schema}.Sanitize()+`.wt_done`).Scan(&n))
	return n
}

// Tables a version 6 build left, with a DONE that a round wrote within a
// coordinator's promise to poll (so not notified, and recorded nowhere
// but in its row) and a claim still running, are migrated to version 7 by
// the next coordinator: its first read of every finished row delivers the
// old DONE; this build's round records the claim's DONE in wt_done,
// within the promise, without a notification, and the coordinator's polls
// deliver it; its next write deletes the wt_done row.
func TestTablesOfVersion6AreMigratedWithTheirFinishedRows(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, pgtransport.MigrateTo(ctx, e.pool, e.store, 6))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	leader := e.lead(t, "coordinator")
	for _, id := range []string{"a1", "a2"} {
		body, err := json.Marshal(assignment(id, "w-"+id).Assign)
		require.NoError(t, err)
		_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ($1, 'default', $2, $3, $4, $5)`,
			id, "w-"+id, leader.Lease(), leader.Term(), string(body))
		require.NoError(t, err)
	}
	// A version 6 coordinator's promise, as its writes leave it.
	_, err := e.pool.Exec(ctx, `INSERT INTO `+s+`wt_polls (queue, until) VALUES ('default', clock_timestamp() + interval '1 hour')`)
	require.NoError(t, err)
	var claimed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_host_round('h', 'default', '{}', '{}', '{}', '{}', '{}', '{}', 2)`).Scan(&claimed))
	require.Equal(t, 2, claimed)
	done, err := json.Marshal(worker.Message{Kind: worker.MsgDone, Worker: "w-a1", Assignment: "a1", Reason: "from version 6"})
	require.NoError(t, err)
	var notified int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT o_kind FROM `+s+`wt_host_round('h', 'default', ARRAY['a1'], ARRAY[$1], ARRAY[true], '{}', '{}', '{}', 0) WHERE o_what = 'w'`,
		string(done)).Scan(&notified))
	require.Zero(t, notified, "version 6 does not notify within a promise")

	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: time.Hour}, in)
	var version int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT version FROM `+s+`transport_schema`).Scan(&version))
	assert.Equal(t, pgtransport.SchemaVersion, version)
	got := in.await(t, "a1's DONE of version 6", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	assert.Equal(t, "from version 6", got.Reason)
	assert.Equal(t, "h", claimedBy(t, e, "a2"), "the claim survives the migration")

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	assert.Equal(t, int64(1), h.Stats().Messages)
	assert.Zero(t, h.Stats().Notifies, "within the promise the round records its DONE in wt_done, not in a notification")
	require.Equal(t, 1, doneRows(t, e))
	// The coordinator polls once it writes (its own promise).
	require.NoError(t, c.Send(ctx, assignment("a3", "w-a3")))
	in.await(t, "a2's DONE, from wt_done", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
	// A write after the read of a2's wt_done row deletes it. The DONE can
	// reach the inbox first through another read (every finished row's,
	// or by id) while the poll that reads the row is still to come: each
	// try writes once more after the polls since.
	n := 4
	require.Eventually(t, func() bool {
		n++
		id := fmt.Sprintf("a%d", n)
		if err := c.Send(ctx, assignment(id, "w-"+id)); err != nil {
			return false
		}
		return c.Flush(ctx) == nil && doneRows(t, e) == 0
	}, time.Minute, 5*time.Millisecond, "a write after the read that delivered a2 deletes its wt_done row")
}

// A coordinator with a thousand and more assignments out still promises
// to poll (each poll reads what finished, from wt_done, not every
// assignment out; version 6 promised for up to 1,024), and every DONE is
// delivered once.
func TestManyOutStillPromised(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour}, in)
	const n = 1500
	for i := range n {
		require.NoError(t, c.Send(ctx, assignment(fmt.Sprintf("a%d", i), fmt.Sprintf("w%d", i))))
	}
	require.NoError(t, c.Flush(ctx))
	var promised bool
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) = 1 FROM `+pgx.Identifier{e.schema}.Sanitize()+`.wt_polls WHERE queue = 'default'`).Scan(&promised))
	assert.True(t, promised, "the writes of 1,500 assignments promise to poll")
	h := e.host(t, pgtransport.HostConfig{Capacity: 500, PollInterval: time.Hour, Runtime: worker.RuntimeConfig{Agent: instant}})
	require.Eventually(t, func() bool {
		seen := 0
		for _, m := range in.all() {
			if m.Kind == worker.MsgDone {
				seen++
			}
		}
		return seen >= n
	}, guard, 5*time.Millisecond, "every DONE")
	done := map[foreman.AssignmentID]int{}
	for _, m := range in.all() {
		if m.Kind == worker.MsgDone {
			done[m.Assignment]++
		}
	}
	assert.Len(t, done, n)
	for id, k := range done {
		assert.Equal(t, 1, k, "%s's DONE delivered once", id)
	}
	assert.Equal(t, int64(n), h.Stats().Messages)
}
