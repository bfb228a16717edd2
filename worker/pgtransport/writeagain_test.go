package pgtransport_test

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A coordinator writes new assignments with a plain INSERT; a write that
// follows a failed one, whose outcome is unknown, skips the assignments
// that landed. Here one landed before (its row is there already): the
// first write fails on it, the next one writes the rest.
func TestAWriteAfterAFailedOneSkipsTheAssignmentsThatLanded(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	leader := e.lead(t, "coordinator")
	c := e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: 50 * time.Millisecond}, newInbox())
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	body, err := json.Marshal(assignment("a1", "w-a1").Assign)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ('a1', 'default', 'w-a1', $1, $2, $3)`,
		leader.Lease(), leader.Term(), string(body))
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, assignment("a1", "w-a1")))
	require.NoError(t, c.Send(ctx, assignment("a2", "w-a2")))
	fctx, cancel := context.WithTimeout(ctx, guard)
	defer cancel()
	require.NoError(t, c.Flush(fctx), "the writes went through")
	var n int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_assignments WHERE id IN ('a1', 'a2')`).Scan(&n))
	require.Equal(t, 2, n)
}
