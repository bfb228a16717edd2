package pgtransport_test

import (
	"context"
	"errors"
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

	// The next read deletes what the last one delivered: once a2's DONE
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
