package pgtransport_test

import (
	"context"
	"errors"
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

// rowOf is the assignment row's state and the number of message rows
// written for it; state -1 when the row is gone.
func rowOf(t *testing.T, e *env, id foreman.AssignmentID) (state int, messages int) {
	t.Helper()
	ctx := context.Background()
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	err := e.pool.QueryRow(ctx, `SELECT state FROM `+s+`wt_assignments WHERE id = $1`, string(id)).Scan(&state)
	if errors.Is(err, pgx.ErrNoRows) {
		state = -1
	} else {
		require.NoError(t, err)
	}
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_messages WHERE assignment = $1`, string(id)).Scan(&messages))
	return state, messages
}

// A final message goes into its assignment's row (state 2, finished), not
// into a message row: the row takes nothing more from its host (a second
// final message, a heartbeat), a KILL leaves it for the coordinator,
// which delivers the message in its place among the others and deletes
// the row with its next read.
func TestAFinalMessageIsWrittenIntoItsAssignmentsRow(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour}, nil)
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true, Capacity: 2,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	require.Equal(t, "h", claimedBy(t, e, "a1"))

	h.Inject(worker.Message{Kind: worker.MsgStatus, Status: worker.StatusRunning, Worker: "w1", Assignment: "a1"})
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1", Reason: "first"})
	h.Inject(worker.Message{Kind: worker.MsgFailed, Worker: "w1", Assignment: "a1", Reason: "second"})
	require.NoError(t, h.Round(ctx))
	state, messages := rowOf(t, e, "a1")
	assert.Equal(t, 2, state, "the DONE finished the row")
	assert.Equal(t, 1, messages, "only the STATUS has a message row")
	assert.Equal(t, "", claimedBy(t, e, "a1"))
	assert.Equal(t, int64(2), h.Stats().Messages, "the STATUS and the DONE")
	assert.Equal(t, int64(1), h.Stats().Dropped, "a second final message of the round is not written")

	h.Inject(worker.Message{Kind: worker.MsgFailed, Worker: "w1", Assignment: "a1", Reason: "late"})
	require.NoError(t, h.Round(ctx))
	assert.Equal(t, int64(2), h.Stats().Dropped, "a finished row takes no final message of a later round")

	require.NoError(t, c.Send(ctx, worker.Command{Kind: worker.CommandKill, Worker: "w1", Assignment: "a1", Reason: "too late"}))
	require.NoError(t, c.Flush(ctx))
	state, _ = rowOf(t, e, "a1")
	assert.Equal(t, 2, state, "a KILL leaves a finished row to be delivered")

	in := newInbox()
	c.Start(in)
	done := in.await(t, "a1's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone })
	assert.Equal(t, "first", done.Reason)
	got := in.all()
	require.Len(t, got, 2, "the STATUS and the DONE, nothing more: %+v", got)
	assert.Equal(t, worker.MsgStatus, got[0].Kind, "the message written first comes first")

	// The next write deletes what the reads delivered (or a read of every
	// finished row, such as the one LISTEN asks for): once a2's DONE
	// arrives (the host's write wakes the coordinator, whose poll is an
	// hour), a1's row is gone.
	select {
	case <-c.Listening():
	case <-time.After(guard):
		t.Fatal("the coordinator did not LISTEN")
	}
	require.NoError(t, c.Send(ctx, assignment("a2", "w2")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	state, _ = rowOf(t, e, "a2")
	require.Equal(t, 2, state)
	in.await(t, "a2's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
	state, messages = rowOf(t, e, "a1")
	assert.Equal(t, -1, state, "the delivered row is deleted")
	assert.Equal(t, 0, messages, "and so is the delivered message")
}

// Finishing a row changes no indexed column (finished rows have no index
// of their own, and the open index's predicate is the host, which a
// claim sets): the UPDATE is HOT, writing no index entry.
func TestFinishingAnAssignmentIsAHOTUpdate(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator")}, nil)
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	tx, err := e.pool.Begin(ctx)
	require.NoError(t, err)
	defer func() { _ = tx.Rollback(ctx) }()
	hot := func() (n int64) {
		require.NoError(t, tx.QueryRow(ctx, `SELECT pg_stat_get_xact_tuples_hot_updated($1::regclass)`, e.schema+".wt_assignments").Scan(&n))
		return n
	}
	var claimed int
	require.NoError(t, tx.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_claim('h', 'default', 1)`).Scan(&claimed))
	require.Equal(t, 1, claimed)
	before := hot()
	done := `{"Kind":"DONE","Worker":"w1","Assignment":"a1"}`
	var written, finished int
	require.NoError(t, tx.QueryRow(ctx, `SELECT o_written, o_finished FROM `+s+`wt_host_write('h', ARRAY['a1'], ARRAY[$1], ARRAY[true])`,
		done).Scan(&written, &finished))
	require.Equal(t, []int{1, 1}, []int{written, finished})
	assert.Equal(t, before+1, hot(), "the DONE's update of its row is HOT")
}

// A host's notification names the rows it finished, and the coordinator
// reads those by id; when the list would not fit a notification's
// payload, the notification says so (an empty payload) and the
// coordinator reads every finished row of its queue.
func TestTooManyFinishedRowsForANotificationAreReadAllTheSame(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	// No read cooldown: no promise to poll (pollPromise), so that every
	// finishing round notifies.
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour, ReadCooldown: -1}, in)
	select {
	case <-c.Listening():
	case <-time.After(guard):
		t.Fatal("the coordinator did not LISTEN")
	}
	const n = 130 // ids of 64 characters: more than 7,900 bytes of JSON
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true, Capacity: n + 1,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	// One hand-off first: once its DONE, read by id, is delivered, the
	// coordinator's start-up reads of every finished row are behind it.
	require.NoError(t, c.Send(ctx, assignment("a0", "w0")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w0", Assignment: "a0"})
	require.NoError(t, h.Round(ctx))
	in.await(t, "a0's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a0" })

	id := func(i int) foreman.AssignmentID { return foreman.AssignmentID(fmt.Sprintf("%064d", i)) }
	for i := range n {
		require.NoError(t, c.Send(ctx, assignment(string(id(i)), fmt.Sprintf("w%d", i+1))))
	}
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	require.Equal(t, int64(n+1), h.Stats().Claimed)
	for i := range n {
		h.Inject(worker.Message{Kind: worker.MsgDone, Worker: foreman.WorkerID(fmt.Sprintf("w%d", i+1)), Assignment: id(i)})
	}
	require.NoError(t, h.Round(ctx))
	seen := map[foreman.AssignmentID]bool{}
	in.await(t, "every DONE", func(m worker.Message) bool {
		if m.Kind == worker.MsgDone {
			seen[m.Assignment] = true
		}
		return len(seen) == n+1
	})
}
