package pgtransport_test

import (
	"context"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A host starts a round at most once per Cooldown while one of its runs
// still has something to send: new work and a run's DONE wait for the
// rest of the cooldown (the host's clock is fake: nothing moves it but the
// test) and then go together; once no run has anything left to send, the
// round goes at once.
func TestABusyHostWaitsForItsCooldown(t *testing.T) {
	const cooldown = 3 * time.Second // under the runs' heartbeats (10 s)
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 50 * time.Millisecond}, in)
	release := make(chan struct{})
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		if req.WorkspacePath == "/wt/slow" {
			select {
			case <-release:
			case <-ctx.Done():
				return phases.AgentResult{}, ctx.Err()
			}
		}
		return phases.AgentResult{Success: true}, nil
	})
	t0 := time.Unix(1_000_000, 0)
	clk := foreman.NewFakeClock(t0)
	h := e.host(t, pgtransport.HostConfig{Capacity: 4, Clock: clk, Cooldown: cooldown, PollInterval: time.Hour,
		Runtime: worker.RuntimeConfig{Agent: agent}})
	select {
	case <-h.Listening():
	case <-time.After(guard):
		t.Fatal("the host did not LISTEN")
	}
	waiting := func(until time.Time) {
		t.Helper()
		var d time.Time
		ok := assert.Eventually(t, func() bool {
			var armed bool
			d, armed = clk.NextDeadline()
			return armed && d.Equal(until)
		}, guard, time.Millisecond)
		require.True(t, ok, "the host waits for its cooldown to end at %v; the next deadline is %v; %+v", until, d, h.Stats())
	}

	// An idle host claims at once.
	require.NoError(t, c.Send(ctx, assignment("slow", "w0")))
	require.Eventually(t, func() bool { return claimedBy(t, e, "slow") == h.Name() }, guard, time.Millisecond)

	// With a run going, new work waits for the cooldown.
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	waiting(t0.Add(cooldown))
	assert.Equal(t, "", claimedBy(t, e, "a1"), "claimed within the cooldown")
	clk.Advance(cooldown)
	require.Eventually(t, func() bool { return h.Stats().Claimed == 2 }, guard, time.Millisecond)

	// a1's DONE waits too, while the slow run may still send.
	waiting(t0.Add(2 * cooldown))
	state, _ := rowOf(t, e, "a1")
	assert.Equal(t, 1, state, "a1's DONE written within the cooldown")
	rounds := h.Stats().Rounds

	// The slow run ends: nothing is left to send, so the round goes at
	// once, with both DONEs.
	close(release)
	for _, id := range []string{"a1", "slow"} {
		in.await(t, id+"'s DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && string(m.Assignment) == id })
	}
	// (The host counts a round once its reply is read, after the
	// coordinator may have delivered what it wrote. A wake-up that came
	// while that round was being prepared may add an empty round after
	// it.)
	require.Eventually(t, func() bool { return h.Stats().Messages == 2 }, guard, time.Millisecond)
	s := h.Stats()
	assert.LessOrEqual(t, s.Rounds, rounds+2, "one round carried both DONEs: %+v", s)
}

// The coordinator's reads delete nothing (a read-only transaction costs no
// commit): the finished rows it delivered are deleted by its next write,
// in the same transaction, and delivered once.
func TestDeliveredRowsAreDeletedByTheNextWrite(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour}, in)
	select {
	case <-c.Listening():
	case <-time.After(guard):
		t.Fatal("the coordinator did not LISTEN")
	}
	// The first read, and the one LISTEN asks for, have happened: from
	// now on only the host's notifications wake the coordinator.
	require.Eventually(t, func() bool { return c.Stats().Reads >= 2 }, guard, time.Millisecond)
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true, Capacity: 2,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)

	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, h.Round(ctx))
	in.await(t, "a1's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	state, _ := rowOf(t, e, "a1")
	assert.Equal(t, 2, state, "the read deleted nothing")

	require.NoError(t, c.Send(ctx, assignment("a2", "w2")))
	require.NoError(t, c.Flush(ctx))
	state, _ = rowOf(t, e, "a1")
	assert.Equal(t, -1, state, "the write deleted the delivered row")
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	in.await(t, "a2's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
	n := 0
	for _, m := range in.all() {
		if m.Assignment == "a1" {
			n++
		}
	}
	assert.Equal(t, 1, n, "a1's DONE was delivered once")
}

// The coordinator reads its hosts' messages at most once per ReadCooldown
// (its clock is fake: nothing moves it but the test): a DONE written
// within the cooldown of the last read is delivered once it ends.
func TestTheCoordinatorReadsAtMostOncePerReadCooldown(t *testing.T) {
	const cooldown = 3 * time.Second
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	t0 := time.Unix(1_000_000, 0)
	clk := foreman.NewFakeClock(t0)
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour, ReadCooldown: cooldown, Clock: clk}, in)
	select {
	case <-c.Listening():
	case <-time.After(guard):
		t.Fatal("the coordinator did not LISTEN")
	}
	waiting := func(until time.Time) {
		t.Helper()
		var d time.Time
		ok := assert.Eventually(t, func() bool {
			var armed bool
			d, armed = clk.NextDeadline()
			return armed && d.Equal(until)
		}, guard, time.Millisecond)
		require.True(t, ok, "the coordinator waits for its read cooldown to end at %v; the next deadline is %v", until, d)
	}
	// LISTEN asked for a read right after the first one: it waits.
	waiting(t0.Add(cooldown))
	clk.Advance(cooldown)
	require.Eventually(t, func() bool { return c.Stats().Reads >= 2 }, guard, time.Millisecond)

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, h.Round(ctx))
	waiting(t0.Add(2 * cooldown))
	assert.Empty(t, in.all(), "delivered within the read cooldown")
	clk.Advance(cooldown)
	in.await(t, "a1's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
}

// A coordinator that stops between delivering a DONE and deleting its row
// (its next write would have) leaves the row to the next term's
// coordinator, which delivers it once (its Dispatcher fences it off as
// stale) and deletes it with its own next write.
func TestADeliveredRowNotYetDeletedReachesTheNextTerm(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old, err := e.store.TryLead(ctx, pgstore.LeaseOptions{Holder: "old", TTL: time.Minute})
	require.NoError(t, err)
	inOld := newInbox()
	// The old term reads on its fake clock's polls only (no LISTEN: the
	// first LISTEN's "maybe missed" full read would delete what it
	// delivered before the term ends, which is its right, and the test's
	// race): one poll delivers a1's DONE, and no read after it deletes it.
	// No read cooldown, so no promise to poll (whose polls would read
	// again right after).
	clk := foreman.NewFakeClock(time.Unix(1_000_000, 0))
	first := e.coordinator(t, pgtransport.Config{Lease: old.Lease(), Term: old.Term(), PollInterval: 10 * time.Second,
		NoListen: true, ReadCooldown: -1, Clock: clk}, inOld)
	// Its first read (at start, of every finished row) is over before a1
	// finishes: a1's DONE comes with the next poll, and nothing after.
	for first.Stats().Reads < 1 {
		runtime.Gosched()
	}
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true, Capacity: 2,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	require.NoError(t, first.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, first.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, h.Round(ctx))
	require.NoError(t, clk.BlockUntil(ctx, 1)) // the old term's read loop waits for its next poll
	clk.Advance(10 * time.Second)
	inOld.await(t, "a1's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
	state, _ := rowOf(t, e, "a1")
	require.Equal(t, 2, state, "delivered, not deleted yet")

	// The old term ends here, before its next write.
	require.NoError(t, old.Resign(ctx))
	next, err := e.store.TryLead(ctx, pgstore.LeaseOptions{Holder: "next", TTL: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Resign(ctx) })
	in := newInbox()
	second := e.coordinator(t, pgtransport.Config{Leader: next, PollInterval: 50 * time.Millisecond}, in)
	in.await(t, "a1's DONE in the next term", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })

	require.NoError(t, second.Send(ctx, assignment("a2", "w2")))
	require.NoError(t, second.Flush(ctx))
	require.NoError(t, h.Round(ctx))
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w2", Assignment: "a2"})
	require.NoError(t, h.Round(ctx))
	in.await(t, "a2's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a2" })
	// Deleted by the write of a2, or, when that write took its deletions
	// while the read that delivered a1's DONE was still marking it, by the
	// next write or read of every finished row (every PollInterval).
	require.Eventually(t, func() bool { state, _ = rowOf(t, e, "a1"); return state == -1 }, guard, time.Millisecond,
		"the next term deleted the row it delivered")
	n := 0
	for _, m := range in.all() {
		if m.Assignment == "a1" {
			n++
		}
	}
	assert.Equal(t, 1, n, "a1's DONE reached the next term once")
}
