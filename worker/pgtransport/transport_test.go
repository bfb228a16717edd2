package pgtransport_test

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

func assignment(id, slot string) worker.Command {
	a := &worker.Assignment{ID: foreman.AssignmentID(id), Worker: foreman.WorkerID(slot), Item: foreman.ItemID("item-" + id),
		Prompt: "p", Worktree: "/wt/" + id, Attempt: 1}
	return worker.Command{Kind: worker.CommandAssign, Worker: a.Worker, Assignment: a.ID, Assign: a}
}

var instant = worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
	return phases.AgentResult{Success: true}, nil
})

// Many hosts claim from one queue at once: every assignment runs exactly
// once and is reported DONE exactly once.
func TestClaimsAreExclusiveUnderConcurrency(t *testing.T) {
	const hosts, capacity, assignments = 8, 4, 300
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 50 * time.Millisecond}, in)
	var mu sync.Mutex
	runs := map[string][]string{} // worktree -> hosts that ran it
	for i := range hosts {
		name := fmt.Sprintf("host-%d", i)
		agent := worker.AgentFunc(func(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
			mu.Lock()
			runs[req.WorkspacePath] = append(runs[req.WorkspacePath], name)
			mu.Unlock()
			return phases.AgentResult{Success: true}, nil
		})
		e.host(t, pgtransport.HostConfig{Name: name, Capacity: capacity, PollInterval: 50 * time.Millisecond,
			Runtime: worker.RuntimeConfig{Agent: agent}})
	}
	for i := range assignments {
		require.NoError(t, c.Send(context.Background(), assignment(fmt.Sprintf("a%d", i), fmt.Sprintf("w%d", i))))
	}
	in.await(t, "every DONE", func(worker.Message) bool {
		n := 0
		for _, m := range in.all() {
			if m.Kind == worker.MsgDone {
				n++
			}
		}
		return n >= assignments
	})
	done := map[foreman.AssignmentID]int{}
	for _, m := range in.all() {
		if m.Kind == worker.MsgDone {
			done[m.Assignment]++
		}
	}
	assert.Len(t, done, assignments)
	for id, n := range done {
		assert.Equal(t, 1, n, "%s reported DONE once", id)
	}
	mu.Lock()
	defer mu.Unlock()
	assert.Len(t, runs, assignments)
	ranOn := map[string]bool{}
	for wt, hs := range runs {
		assert.Len(t, hs, 1, "%s ran exactly once, not on %v", wt, hs)
		ranOn[hs[0]] = true
	}
	t.Logf("%d assignments ran on %d of %d hosts", assignments, len(ranOn), hosts)
}

// Messages of an assignment a host does not hold (another host's, or one
// the coordinator withdrew) are never written, so never delivered.
func TestMessagesOfAssignmentsNotHeldAreDropped(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 50 * time.Millisecond}, in)
	ctx := context.Background()
	newManualHost := func(name string) *pgtransport.Host {
		h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: name, NoListen: true,
			Capacity: 2, Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}}) // 2: a2 need not wait for the killed a1 to end
		require.NoError(t, err)
		return h
	}
	holder, rogue := newManualHost("holder"), newManualHost("rogue")
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, holder.Round(ctx))
	require.Equal(t, "holder", claimedBy(t, e, "a1"))

	rogue.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, rogue.Round(ctx))
	assert.Equal(t, int64(1), rogue.Stats().Dropped, "another host's assignment: dropped")
	assert.Equal(t, "holder", claimedBy(t, e, "a1"), "the rogue DONE did not end the assignment")

	require.NoError(t, c.Send(ctx, worker.Command{Kind: worker.CommandKill, Worker: "w1", Assignment: "a1", Reason: "stalled"}))
	require.NoError(t, c.Flush(ctx))
	holder.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
	require.NoError(t, holder.Round(ctx))
	assert.Equal(t, int64(1), holder.Stats().Dropped, "a withdrawn assignment: its late DONE is dropped")
	assert.Equal(t, int64(1), holder.Stats().Commands, "the holder got the KILL")

	// A message that is written arrives; the dropped ones never do.
	require.NoError(t, c.Send(ctx, assignment("a2", "w2")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, holder.Round(ctx))
	holder.Inject(worker.Message{Kind: worker.MsgStatus, Worker: "w2", Assignment: "a2", Status: "running"})
	require.NoError(t, holder.Round(ctx))
	in.await(t, "a2's STATUS", func(m worker.Message) bool { return m.Assignment == "a2" && m.Kind == worker.MsgStatus })
	for _, m := range in.all() {
		assert.NotEqual(t, worker.MsgDone, m.Kind, "no DONE was delivered: %+v", m)
	}
}

// newBlocking is an agent that runs until its context ends.
func newBlocking() worker.AgentFunc {
	return func(ctx context.Context, _ phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		<-ctx.Done()
		return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
	}
}

// With polling an hour apart, only NOTIFY can wake the host for new work
// and the coordinator for the host's DONE.
func TestNotifyWakesHostsAndCoordinator(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour}, in)
	h := e.host(t, pgtransport.HostConfig{PollInterval: time.Hour, Runtime: worker.RuntimeConfig{Agent: instant}})
	<-c.Listening()
	<-h.Listening()
	for i := range 3 { // the first round after LISTEN has passed; each needs a fresh wake-up
		id := fmt.Sprintf("a%d", i)
		require.NoError(t, c.Send(context.Background(), assignment(id, "w1")))
		in.await(t, "DONE of "+id, func(m worker.Message) bool { return m.Kind == worker.MsgDone && string(m.Assignment) == id })
	}
}

// Without LISTEN, polling alone carries the work both ways.
func TestPollingAloneCarriesWork(t *testing.T) {
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 20 * time.Millisecond, NoListen: true}, in)
	e.host(t, pgtransport.HostConfig{PollInterval: 20 * time.Millisecond, NoListen: true, Runtime: worker.RuntimeConfig{Agent: instant}})
	for i := range 3 {
		id := fmt.Sprintf("a%d", i)
		require.NoError(t, c.Send(context.Background(), assignment(id, "w1")))
		in.await(t, "DONE of "+id, func(m worker.Message) bool { return m.Kind == worker.MsgDone && string(m.Assignment) == id })
	}
}

// One host's heartbeats for all its runs go in one statement per round.
func TestHeartbeatsOfManyRunsAreBatched(t *testing.T) {
	const runs = 50
	e := newEnv(t)
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 50 * time.Millisecond}, in)
	h := e.host(t, pgtransport.HostConfig{Capacity: runs, PollInterval: 50 * time.Millisecond, Runtime: worker.RuntimeConfig{Agent: newBlocking()}})
	for i := range runs {
		require.NoError(t, c.Send(context.Background(), assignment(fmt.Sprintf("a%d", i), fmt.Sprintf("w%d", i))))
	}
	in.await(t, "a heartbeat of every run", func(worker.Message) bool {
		seen := map[foreman.AssignmentID]bool{}
		for _, m := range in.all() {
			if m.Kind == worker.MsgHeartbeat {
				seen[m.Assignment] = true
			}
		}
		return len(seen) == runs
	})
	s := h.Stats()
	assert.GreaterOrEqual(t, s.Beats, int64(runs))
	assert.Less(t, s.BeatWrites, s.Beats, "heartbeats share statements: %+v", s)
	t.Logf("host stats: %+v", s)
}

// A coordinator whose term was superseded writes nothing: no assignment,
// no command. A paused one (configured with its term only) learns it at
// its next write; one with a Leader that knows it lost refuses at once.
func TestFencedCoordinatorCannotCreateOrCommand(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	old, err := e.store.TryLead(ctx, pgstore.LeaseOptions{Holder: "old", TTL: time.Minute})
	require.NoError(t, err)
	in := newInbox()
	paused := e.coordinator(t, pgtransport.Config{Lease: old.Lease(), Term: old.Term(), PollInterval: 50 * time.Millisecond}, in)
	withLeader := e.coordinator(t, pgtransport.Config{Leader: old, Queue: "other", PollInterval: 50 * time.Millisecond}, nil)
	stopped := make(chan struct{})
	agent := worker.AgentFunc(func(ctx context.Context, _ phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		<-ctx.Done()
		close(stopped)
		return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
	})
	e.host(t, pgtransport.HostConfig{PollInterval: 50 * time.Millisecond, Runtime: worker.RuntimeConfig{Agent: agent}})
	require.NoError(t, paused.Send(ctx, assignment("a1", "w1")))
	in.await(t, "a1 running", func(m worker.Message) bool { return m.Assignment == "a1" })

	require.NoError(t, old.Resign(ctx))
	next, err := e.store.TryLead(ctx, pgstore.LeaseOptions{Holder: "next", TTL: time.Minute})
	require.NoError(t, err)
	t.Cleanup(func() { _ = next.Resign(ctx) })

	require.NoError(t, paused.Send(ctx, assignment("a2", "w2")), "Send does not wait for the database")
	require.NoError(t, paused.Send(ctx, worker.Command{Kind: worker.CommandKill, Worker: "w1", Assignment: "a1", Reason: "x"}))
	err = paused.Flush(ctx)
	require.ErrorIs(t, err, pgstore.ErrFenced)
	var fe *pgstore.FencedError
	require.ErrorAs(t, err, &fe)
	assert.Equal(t, old.Term(), fe.Term)
	assert.Equal(t, next.Term(), fe.Current)
	assert.Equal(t, "", claimedBy(t, e, "a2"), "the fenced ASSIGN created nothing")
	assert.NotEmpty(t, claimedBy(t, e, "a1"), "the fenced KILL withdrew nothing")
	select {
	case <-stopped:
		t.Fatal("the fenced KILL stopped the run")
	default:
	}
	assert.ErrorIs(t, paused.Send(ctx, assignment("a3", "w3")), pgstore.ErrFenced, "once fenced, Send refuses at once")
	assert.ErrorIs(t, withLeader.Send(ctx, assignment("a4", "w4")), pgstore.ErrFenced, "a Leader that lost refuses before the database")

	_, err = pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: e.pool, Store: e.store, Lease: old.Lease(), Term: old.Term()})
	assert.ErrorIs(t, err, pgstore.ErrFenced, "a coordinator cannot even start under a superseded term")

	// The new term's coordinator withdraws the old term's assignment: its
	// run is killed.
	e.coordinator(t, pgtransport.Config{Leader: next, PollInterval: 50 * time.Millisecond}, newInbox())
	select {
	case <-stopped:
	case <-time.After(guard):
		t.Fatal("the new term did not stop the old term's run")
	}
	assert.Equal(t, "", claimedBy(t, e, "a1"))
}

func TestBadConfigurationIsRefused(t *testing.T) {
	ctx := context.Background()
	for name, cfg := range map[string]pgtransport.Config{
		"no pool":  {},
		"no fence": {Pool: newEnv(t).pool, Store: newEnv(t).store},
	} {
		_, err := pgtransport.NewCoordinator(ctx, cfg)
		assert.ErrorIs(t, err, pgtransport.ErrInvalidConfig, name)
	}
	_, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{})
	assert.ErrorIs(t, err, pgtransport.ErrInvalidConfig)
}

// A host that never got the KILL (lost, say) learns at its next heartbeat
// that the assignment was withdrawn, and stops the run.
func TestHostStopsARunWhoseAssignmentVanished(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator")}, newInbox())
	stopped := make(chan struct{})
	agent := worker.AgentFunc(func(ctx context.Context, _ phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		<-ctx.Done()
		close(stopped)
		return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
	})
	started := make(chan struct{}, 1)
	onEvent := func(ev worker.Event) { // the Runtime reports the start after the run's first heartbeat
		if ev.Kind == worker.EventAgentStarted {
			started <- struct{}{}
		}
	}
	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, OnEvent: onEvent}})
	require.NoError(t, err)
	require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
	require.NoError(t, c.Flush(ctx))
	require.NoError(t, h.Round(ctx)) // claims a1
	require.Equal(t, "h", claimedBy(t, e, "a1"))
	select {
	case <-started:
	case <-time.After(guard):
		t.Fatal("the run did not start")
	}
	_, err = e.pool.Exec(ctx, "DELETE FROM "+pgx.Identifier{e.schema}.Sanitize()+".wt_assignments WHERE id = 'a1'")
	require.NoError(t, err)
	require.NoError(t, h.Round(ctx)) // writes the heartbeat, which finds no row
	select {
	case <-stopped:
	case <-time.After(guard):
		t.Fatal("the run of a vanished assignment kept running")
	}
	assert.Equal(t, int64(0), h.Stats().Beats, "no heartbeat was written for it")
}

// A schema name goes into SQL (function bodies included): one that is not
// a plain identifier is refused at configuration, before any connection.
func TestAHostRefusesASchemaNameThatIsNotAPlainIdentifier(t *testing.T) {
	pool, err := pgxpool.New(context.Background(), "postgres://127.0.0.1:1/none") // connects lazily
	require.NoError(t, err)
	defer pool.Close()
	_, err = pgtransport.NewHost(context.Background(), pgtransport.HostConfig{Pool: pool, Schema: "x$fn$; DROP TABLE y; $fn$",
		Runtime: worker.RuntimeConfig{Agent: instant}})
	require.ErrorIs(t, err, pgtransport.ErrInvalidConfig)
	require.ErrorIs(t, err, pgstore.ErrInvalidSchemaName)
	assert.Contains(t, err.Error(), "HostConfig.Schema")
}
