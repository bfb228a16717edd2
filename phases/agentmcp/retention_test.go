package agentmcp_test

import (
	"context"
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentmcp"
)

// The server forgets an ended assignment (what its stage expected, its
// report) and keeps its token's tombstone: a request with the token is
// still refused as Expired and told to the host as that assignment's
// agent's.
func TestAnEndedAssignmentIsForgottenButItsTokenStillRefused(t *testing.T) {
	t.Parallel()
	h := &host{changed: true}
	s := start(t, h)
	ctx := context.Background()
	const n = 10
	tokens := make([]string, n)
	for i := range n {
		id := foreman.AssignmentID(fmt.Sprintf("US-%03d-a1", i))
		tokens[i] = s.Begin(buildOf(foreman.ItemID(fmt.Sprintf("US-%03d", i)), id))
		res, err := dial(t, s, tokens[i]).Report(ctx, agentmcp.Report{Assignment: id, Outcome: "complete"})
		require.NoError(t, err)
		require.Equal(t, "accepted", res.Verdict)
		_, ok := s.End(id)
		require.True(t, ok)
	}
	assert.Zero(t, s.Held(), "ended assignments still held")
	_, ok := s.End("US-003-a1")
	assert.False(t, ok, "an ended assignment's report is taken once")

	_, err := agentmcp.Dial(ctx, s.URL(), tokens[3])
	require.Error(t, err, "the token of an ended assignment still proves nothing")
	assert.Contains(t, err.Error(), "Unauthorized")
	st := s.Stats()
	assert.Equal(t, int64(n), st.Accepted)
	assert.Positive(t, st.Expired)
	assert.Zero(t, st.Unauthorized, "an ended token is known as ended, not as never issued")
	refused := h.refused()
	require.NotEmpty(t, refused)
	for _, r := range refused {
		assert.Equal(t, agentmcp.RefusedEnded, r.Reason)
		assert.Equal(t, agentmcp.Assignment{ID: "US-003-a1", Item: "US-003", Worker: "w1", Stage: 2, Role: "builder"}, r.By)
	}
}
