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

// A coordinator that hands out work promises to poll for it (each
// assignment carries the promise, ten ReadCooldowns long): a host's round
// that finishes only such assignments sends no notification, and the
// coordinator delivers the DONE by polling (its clock is fake: nothing
// moves it but the test). One that does not promise (ReadCooldown off) is
// notified as before.
func TestARoundWithinTheCoordinatorsPromiseDoesNotNotify(t *testing.T) {
	for _, tc := range []struct {
		name     string
		cooldown time.Duration
		notifies int64
	}{
		{"promised", 10 * time.Second, 0},
		{"no promise", -1, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t)
			ctx := context.Background()
			in := newInbox()
			clk := foreman.NewFakeClock(time.Unix(1_000_000, 0))
			c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour, ReadCooldown: tc.cooldown, Clock: clk}, in)
			select {
			case <-c.Listening():
			case <-time.After(guard):
				t.Fatal("the coordinator did not LISTEN")
			}
			// The first read, and the one LISTEN asks for, are over: from
			// now on only notifications and promises make it read.
			require.Eventually(t, func() bool {
				clk.Advance(max(tc.cooldown, time.Second))
				return c.Stats().Reads >= 2
			}, guard, time.Millisecond)
			h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
				Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
			require.NoError(t, err)
			require.NoError(t, c.Send(ctx, assignment("a1", "w1")))
			require.NoError(t, c.Flush(ctx))
			require.NoError(t, h.Round(ctx))
			require.Equal(t, int64(1), h.Stats().Claimed)
			h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w1", Assignment: "a1"})
			require.NoError(t, h.Round(ctx))
			s := h.Stats()
			require.Equal(t, int64(1), s.Messages)
			assert.Equal(t, tc.notifies, s.Notifies)
			advanced := time.Duration(0)
			require.Eventually(t, func() bool {
				if advanced < 30*time.Minute { // never up to the hourly poll: the promise's polls deliver it
					clk.Advance(max(tc.cooldown, time.Second))
					advanced += max(tc.cooldown, time.Second)
				}
				for _, m := range in.all() {
					if m.Kind == worker.MsgDone && m.Assignment == "a1" {
						return true
					}
				}
				return false
			}, guard, 10*time.Millisecond, "a1's DONE delivered")
		})
	}
}

// Tables a version 5 build left, with a claim running, are migrated to
// version 6 by the next coordinator: the claim has no promise to poll, so
// its DONE, written by this build's host, is notified, and delivered.
func TestTablesOfVersion5AreMigratedWithTheirClaims(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	require.NoError(t, pgtransport.MigrateTo(ctx, e.pool, e.store, 5))
	s := pgx.Identifier{e.schema}.Sanitize() + "."
	leader := e.lead(t, "coordinator")
	body, err := json.Marshal(assignment("a1", "w-a1").Assign)
	require.NoError(t, err)
	_, err = e.pool.Exec(ctx, `INSERT INTO `+s+`wt_assignments (id, queue, slot, lease, term, body) VALUES ('a1', 'default', 'w-a1', $1, $2, $3)`,
		leader.Lease(), leader.Term(), string(body))
	require.NoError(t, err)
	var claimed int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT count(*) FROM `+s+`wt_host_round('h', 'default', '{}', '{}', '{}', '{}', '{}', '{}', 1)`).Scan(&claimed))
	require.Equal(t, 1, claimed)

	in := newInbox()
	e.coordinator(t, pgtransport.Config{Leader: leader, PollInterval: time.Hour}, in)
	var version int
	require.NoError(t, e.pool.QueryRow(ctx, `SELECT version FROM `+s+`transport_schema`).Scan(&version))
	assert.Equal(t, pgtransport.SchemaVersion, version)
	assert.Equal(t, "h", claimedBy(t, e, "a1"), "the claim survives the migration")

	h, err := pgtransport.NewHost(ctx, pgtransport.HostConfig{Pool: e.pool, Schema: e.schema, Name: "h", NoListen: true,
		Runtime: worker.RuntimeConfig{Agent: newBlocking(), Commits: worker.NoCommits}})
	require.NoError(t, err)
	h.Inject(worker.Message{Kind: worker.MsgDone, Worker: "w-a1", Assignment: "a1"})
	require.NoError(t, h.Round(ctx))
	assert.Equal(t, int64(1), h.Stats().Messages)
	assert.Equal(t, int64(1), h.Stats().Notifies, "a row of version 5 has no promise to poll")
	in.await(t, "a1's DONE", func(m worker.Message) bool { return m.Kind == worker.MsgDone && m.Assignment == "a1" })
}

// A host whose runs' messages start its rounds close together stops
// listening (its rounds take new work and commands), and listens again
// once it goes quiet: new work sent after that reaches it at once, though
// it polls only once an hour.
func TestABusyHostStopsListeningUntilItGoesQuiet(t *testing.T) {
	e := newEnv(t)
	ctx := context.Background()
	in := newInbox()
	c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: time.Hour}, in)
	h := e.host(t, pgtransport.HostConfig{Capacity: 2, PollInterval: time.Hour, Runtime: worker.RuntimeConfig{Agent: instant}})
	select {
	case <-h.Listening():
	case <-time.After(guard):
		t.Fatal("the host did not LISTEN")
	}
	const n = 100
	for i := range n {
		require.NoError(t, c.Send(ctx, assignment(fmt.Sprintf("a%d", i), fmt.Sprintf("w%d", i))))
	}
	done := func(k int) bool {
		seen := 0
		for _, m := range in.all() {
			if m.Kind == worker.MsgDone {
				seen++
			}
		}
		return seen >= k
	}
	require.Eventually(t, func() bool { return done(n) }, guard, time.Millisecond, "every DONE")
	assert.Positive(t, h.Stats().Unlistens, "a busy host stops listening: %+v", h.Stats())

	require.Eventually(t, func() bool { return !pgtransport.Paused(h) }, guard, time.Millisecond, "the quiet host listens again")
	require.NoError(t, c.Send(ctx, assignment("late", "w-late")))
	require.Eventually(t, func() bool { return done(n + 1) }, guard, time.Millisecond, "the late assignment, claimed on its notification")
}
