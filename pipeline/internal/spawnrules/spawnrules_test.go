package spawnrules_test

import (
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/internal/spawnrules"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAdmit(t *testing.T) {
	tab := spawnrules.New[string]()
	assert.Equal(t, spawnrules.Submit, tab.Admit("a1", false), "a new assignment is submitted")
	assert.Equal(t, spawnrules.Closed, tab.Admit("a1", true), "a closed spawner refuses")
	tab.Add("a1", "req")
	assert.Equal(t, spawnrules.Known, tab.Admit("a1", false), "a spawn already run does nothing")
	assert.Equal(t, spawnrules.Closed, tab.Admit("a1", true))
	tab.Forget("a1")
	assert.Equal(t, spawnrules.Submit, tab.Admit("a1", false), "a failed submission is tried again")
	assert.Nil(t, tab.Get("a1"))
}

func TestEnds(t *testing.T) {
	for _, tc := range []struct {
		kind worker.EventKind
		ends bool
	}{
		{worker.EventCompleted, true},
		{worker.EventParked, true},
		{worker.EventItemClosed, true},
		{worker.EventAssigned, false},
		{worker.EventReviewRequested, false},
		{worker.EventEscalated, false},
	} {
		assert.Equal(t, tc.ends, spawnrules.Ends(tc.kind), string(tc.kind))
	}
}

func TestEndIsReportedOnceAndNotAfterShutdownOrClose(t *testing.T) {
	tests := []struct {
		name    string
		shut    bool
		closed  bool
		deliver bool
	}{
		{"ended", false, false, true},
		{"shut down", true, false, false},
		{"closed", false, true, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tab := spawnrules.New[string]()
			tab.Add("a1", "req")
			if tc.shut {
				require.NotNil(t, tab.Shut("a1"))
			}
			e, deliver := tab.End("a1", tc.closed)
			assert.Equal(t, tc.deliver, deliver)
			held, ended := tab.Len()
			if tc.closed {
				assert.Nil(t, e, "no end is taken after Close")
				assert.Equal(t, 1, held)
				return
			}
			require.NotNil(t, e)
			assert.Equal(t, "req", e.P)
			assert.Equal(t, 0, held, "only the id of an ended assignment is kept")
			assert.Equal(t, 1, ended)
			assert.Nil(t, tab.Get("a1"))
			assert.Equal(t, spawnrules.Known, tab.Admit("a1", false), "a spawn issued again is still a no-op")
			e, again := tab.End("a1", false)
			assert.Nil(t, e)
			assert.False(t, again, "an end is taken once")
		})
	}
	tab := spawnrules.New[string]()
	e, deliver := tab.End("never", false)
	assert.Nil(t, e)
	assert.False(t, deliver, "an assignment never spawned here is nobody's news")
	assert.Nil(t, tab.Shut("never"))
	assert.True(t, spawnrules.Forgets(worker.EventParked))
	assert.False(t, spawnrules.Forgets(worker.EventCompleted))
}

func TestProbe(t *testing.T) {
	pool := map[foreman.ItemID]worker.ItemState{}
	item := func(id foreman.ItemID) (worker.ItemInfo, bool) {
		s, ok := pool[id]
		return worker.ItemInfo{State: s}, ok
	}
	tab := spawnrules.New[string]()
	assert.Equal(t, spawnrules.TimeoutNow, tab.Probe("a1", item), "never spawned here")
	tab.Add("a1", "req")
	assert.Equal(t, spawnrules.TimeoutLater, tab.Probe("a1", item), "spawned, not in the pool yet")
	for _, s := range []worker.ItemState{worker.Queued, worker.Assigned} {
		pool["a1"] = s
		assert.Equal(t, spawnrules.StatusReply, tab.Probe("a1", item), "held: %v", s)
		assert.True(t, tab.Held("a1", item))
	}
	for _, s := range []worker.ItemState{worker.Done, worker.Parked} {
		pool["a1"] = s
		assert.Equal(t, spawnrules.TimeoutLater, tab.Probe("a1", item), "finished in the pool, end not taken: %v", s)
		assert.False(t, tab.Held("a1", item))
	}
	pool["a1"] = worker.Assigned
	tab.End("a1", false)
	assert.Equal(t, spawnrules.TimeoutNow, tab.Probe("a1", item), "its end was taken")
	assert.False(t, tab.Held("a1", item))
}

func TestPoolConfigItemAndReview(t *testing.T) {
	wc := spawnrules.PoolConfig(worker.Config{MaxWorkers: 3, Mode: worker.ModePooled, CrashBudget: 5, StallBudget: 2})
	assert.Equal(t, worker.ModeFresh, wc.Mode)
	assert.Equal(t, -1, wc.CrashBudget)
	assert.Equal(t, -1, wc.StallBudget)
	assert.Equal(t, 3, wc.MaxWorkers, "the host's settings stay")
	assert.Equal(t, worker.Item{ID: "a1", Stage: 2, Prompt: "p", Worktree: "wt", RequireReview: true},
		spawnrules.Item("a1", 2, "p", "wt", true))
	assert.False(t, spawnrules.Review(false, func() bool { return true }))
	assert.True(t, spawnrules.Review(true, nil))
	assert.False(t, spawnrules.Review(true, func() bool { return false }))
}

func TestReportOfAndEnvelope(t *testing.T) {
	ok := message.Line(message.ErrorReport("S1", 1, "gates failed", 600))
	other := message.Line(message.ErrorReport("S2", 1, "gates failed", 600))
	tests := []struct {
		name, text, want string
	}{
		{"the line", ok, ok},
		{"the last canonical line", "thinking\n" + ok + "\nbye\n", ok},
		{"about another story", other, ""},
		{"garbage", "STAGE 1 COMPLETE for", ""},
		{"empty", "", ""},
	}
	now := time.Date(2026, 11, 27, 0, 0, 0, 0, time.UTC)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			m, raw, found := spawnrules.ReportOf("S1", tc.text)
			assert.Equal(t, tc.want != "", found)
			assert.Equal(t, tc.want, raw)
			env, deliver, err := spawnrules.Envelope("w1", "a1", m, raw, now)
			require.NoError(t, err)
			assert.Equal(t, found, deliver, "a report is delivered, none is EventIdle")
			if deliver {
				assert.Equal(t, tc.want, env.Raw)
				assert.Equal(t, m, env.Body)
				assert.Equal(t, foreman.AssignmentID("a1"), env.Assignment)
			}
		})
	}
	m, raw, _ := spawnrules.ReportOf("S1", ok)
	_, deliver, err := spawnrules.Envelope("w1", "bad id with spaces", m, raw, now)
	assert.False(t, deliver)
	require.ErrorIs(t, err, foreman.ErrInvalidID, "a report under an invalid assignment is EventIdle, and says why")
}
