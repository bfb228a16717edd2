package pgtransport

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/worker"
)

// Messages and assignments go over the wire without their zero fields and
// come back whole; the full JSON of earlier builds reads the same.
func TestTheWireFormatKeepsEveryFieldAndReadsTheFullOne(t *testing.T) {
	at := time.Date(2026, 11, 27, 9, 30, 0, 123, time.UTC)
	for _, m := range []worker.Message{
		{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"},
		{Kind: worker.MsgRateLimited, Worker: "w1", Assignment: "a1", Status: "running", LastOutput: at, Commit: "c0ffee",
			QGPassed: true, QGOutput: "ok", Reason: "limit", ResetsAt: at.Add(time.Hour), Question: "?",
			Usage: worker.Usage{Tokens: 7, CostUSD: 0.5}},
	} {
		b := encodeMessage(m)
		got, err := decodeMessage(b)
		require.NoError(t, err)
		assert.Equal(t, m, got, "%s", b)
		full, err := json.Marshal(m)
		require.NoError(t, err)
		got, err = decodeMessage(full)
		require.NoError(t, err)
		assert.Equal(t, m, got, "an earlier build's %s", full)
		var earlier worker.Message
		require.NoError(t, json.Unmarshal(b, &earlier))
		assert.Equal(t, m, earlier, "an earlier build reads %s", b)
	}
	done := encodeMessage(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	assert.JSONEq(t, `{"Kind": 3, "Worker": "w1", "Assignment": "a1"}`, string(done))

	for _, a := range []worker.Assignment{
		{ID: "a1", Worker: "w1", Item: "i", Prompt: "p", Worktree: "/wt", Attempt: 1},
		{ID: "a1", Worker: "w1", Item: "i", Stage: 2, Prompt: "p", Worktree: "/wt", Attempt: 3, MemoryContext: "m",
			Feedback: "f", RequireReview: true},
	} {
		got, err := decodeAssignment(encodeAssignment(&a))
		require.NoError(t, err)
		assert.Equal(t, a, got)
		full, err := json.Marshal(a)
		require.NoError(t, err)
		got, err = decodeAssignment(full)
		require.NoError(t, err)
		assert.Equal(t, a, got)
	}
}
