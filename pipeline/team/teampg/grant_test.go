package teampg_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// requireRefused asserts that PostgreSQL refused a request for want of
// privilege (SQLSTATE 42501).
func requireRefused(t *testing.T, err error, what string) {
	t.Helper()
	var pe *pgconn.PgError
	require.ErrorAs(t, err, &pe, "%s was not refused", what)
	assert.Equal(t, "42501", pe.Code, "%s: refused, but not for privilege: %v", what, err)
}

// A hostile process on a worker host, with the host's role and its claim on
// one story, through the team's worker functions: it reads and writes that
// story's stage records and nothing else of the team's state (the stories,
// the decisions, the pipeline's records, another host's story or result),
// deletes nothing, and loses even its own story once its claim is
// withdrawn. Each refusal is a permission error, and the records it tried
// are unchanged.
func TestAWorkerRoleWritesOnlyItsClaimedStoriesRecords(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	goodPool, _ := c.newRole(t, true)
	evilPool, _ := c.newRole(t, true)
	leader, err := c.store.TryLead(ctx, pgstore.LeaseOptions{Holder: "coordinator", TTL: time.Minute})
	require.NoError(t, err)
	defer func() { _ = leader.Resign(context.Background()) }()
	co, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: c.pool, Store: c.store, Leader: leader, NoListen: true})
	require.NoError(t, err)
	defer func() { _ = co.Close(context.Background()) }()
	assign := func(id, item, slot string) {
		a := &worker.Assignment{ID: foreman.AssignmentID(id), Worker: foreman.WorkerID(slot), Item: foreman.ItemID(item), Prompt: "p"}
		require.NoError(t, co.Send(ctx, worker.Command{Kind: worker.CommandAssign, Worker: a.Worker, Assignment: a.ID, Assign: a}))
		require.NoError(t, co.Flush(ctx))
	}
	s := pgx.Identifier{c.schema}.Sanitize() + "."
	claim := func(pool interface {
		QueryRow(context.Context, string, ...any) pgx.Row
	}, host string) {
		var seq int64
		require.NoError(t, pool.QueryRow(ctx, `SELECT o_seq FROM `+s+`wt_claim($1, 'default', 1)`, host).Scan(&seq))
	}
	assign("US-001-a1.1", "US-001", "US-001-a1")
	claim(goodPool, "good")
	assign("US-002-a1.1", "US-002", "US-002-a1")
	claim(evilPool, "evil")

	// The coordinator's records, which must come through unchanged.
	theirs := []store.Op{
		{Kind: "team.story", ID: "US-001", Data: []byte(`{"id":"US-001"}`)},
		{Kind: "team.decision", ID: "US-001", Data: []byte(`{}`)},
		{Kind: pipeline.RecordKind, ID: "US-001", Data: []byte(`{}`)},
		{Kind: taskgraph.TaskRecordKind, ID: "team/US-001", Data: []byte(`{}`)},
		{Kind: "team.board", ID: "US-001", Data: []byte(`{"status":"built"}`)},
		{Kind: "team.memory", ID: "US-001", Data: []byte(`{}`)},
		{Kind: "team.base", ID: "US-001-a1", Data: []byte(`{}`)},
		{Kind: "team.stage-result", ID: "US-001-a1.1", Data: []byte(`{"result":"DONE"}`)},
		{Kind: "team.secret", ID: "assignments", Data: []byte(`{"key":"00"}`)},
		{Kind: "team.board", ID: "US-002", Data: []byte(`{}`)},
	}
	before, err := c.store.Apply(ctx, theirs...)
	require.NoError(t, err)

	evil, err := teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: evilPool, Schema: c.schema})
	require.NoError(t, err)
	// What its own stage needs.
	_, err = evil.Get(ctx, "team.secret", "assignments")
	require.NoError(t, err, "the team secret")
	board, err := evil.Get(ctx, "team.board", "US-002")
	require.NoError(t, err, "its claimed story's board")
	_, err = evil.Apply(ctx, store.Op{Kind: "team.board", ID: "US-002", ExpectVersion: board.Version, Data: []byte(`{"status":"mine"}`)},
		store.Op{Kind: "team.memory", ID: "US-002", Data: []byte(`{}`)},
		store.Op{Kind: "team.refused", ID: "US-002", Data: []byte(`{}`)},
		store.Op{Kind: "team.base", ID: "US-002-a1", Data: []byte(`{}`)},
		store.Op{Kind: "team.stage-result", ID: "US-002-a1.1", Data: []byte(`{}`)})
	require.NoError(t, err, "its claimed story's stage records")
	_, err = evil.Apply(ctx, store.Op{Kind: "team.board", ID: "US-002", Data: []byte(`{}`)})
	assert.ErrorIs(t, err, store.ErrConflict, "versions hold as in any store")

	// What it must not.
	for i, op := range theirs[:len(theirs)-1] {
		op.ExpectVersion = before[i].Version
		_, err := evil.Apply(ctx, op)
		requireRefused(t, err, "writing "+op.Kind+" "+op.ID)
		if op.Kind != "team.secret" {
			_, err = evil.Get(ctx, op.Kind, op.ID)
			requireRefused(t, err, "reading "+op.Kind+" "+op.ID)
		}
	}
	_, err = evil.Apply(ctx, store.Op{Kind: "team.story", ID: "US-009", Data: []byte(`{}`)})
	requireRefused(t, err, "adding a story")
	_, err = evil.Apply(ctx, store.Op{Kind: "team.board", ID: "US-002", ExpectVersion: board.Version + 1, Delete: true})
	requireRefused(t, err, "deleting its own story's board")
	_, err = evil.Apply(ctx, store.Op{Kind: "team.board", ID: "US-002", ExpectVersion: board.Version + 1, Data: []byte(`{}`)},
		store.Op{Kind: "team.story", ID: "US-001", ExpectVersion: before[0].Version, Data: []byte(`{"evil":true}`)})
	requireRefused(t, err, "slipping another record into an allowed write")
	_, err = evil.List(ctx, "team.story")
	assert.ErrorIs(t, err, teampg.ErrNotGranted)
	for _, sql := range []string{
		`SELECT * FROM ` + s + `team_worker_may('team.story', 'US-001')`,
		`CREATE OR REPLACE FUNCTION ` + s + `team_worker_may(p_kind text, p_id text) RETURNS bool LANGUAGE sql AS 'SELECT true'`,
		`UPDATE ` + s + `records SET data = '' WHERE kind = 'team.story'`,
	} {
		_, err := evilPool.Exec(ctx, sql)
		requireRefused(t, err, sql)
	}

	// Once its claim is withdrawn, its story is no longer its to write.
	require.NoError(t, co.Send(ctx, worker.Command{Kind: worker.CommandKill, Worker: "US-002-a1", Assignment: "US-002-a1.1"}))
	require.NoError(t, co.Flush(ctx))
	_, err = evil.Apply(ctx, store.Op{Kind: "team.board", ID: "US-002", ExpectVersion: board.Version + 1, Data: []byte(`{}`)})
	requireRefused(t, err, "writing a story whose claim was withdrawn")

	for i, op := range theirs[:len(theirs)-1] {
		rec, err := c.store.Get(ctx, op.Kind, op.ID)
		require.NoError(t, err)
		assert.Equal(t, before[i].Version, rec.Version, "%s %s unchanged", op.Kind, op.ID)
		assert.Equal(t, string(op.Data), string(rec.Data), "%s %s unchanged", op.Kind, op.ID)
	}
}

// A role no coordinator granted cannot open a worker store, nor install
// the functions for itself; the coordinators' role can (a host that logs
// in with it, before any coordinator led).
func TestAWorkerStoreNeedsTheCoordinatorsGrant(t *testing.T) {
	c := newCluster(t)
	ctx := context.Background()
	pool, role := c.newRole(t, false)
	_, err := teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: pool, Schema: c.schema})
	assert.ErrorIs(t, err, teampg.ErrNotGranted)
	own, err := teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: c.pool, Schema: c.schema})
	require.NoError(t, err, "the owner installs the functions")
	assert.Equal(t, c.schema, own.Schema())
	_, err = own.Get(ctx, "team.secret", "assignments")
	assert.ErrorIs(t, err, store.ErrNotFound, "the secret is read before the transport's tables exist")
	_, err = teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: pool, Schema: c.schema})
	assert.ErrorIs(t, err, teampg.ErrNotGranted, "installed, but not granted")
	require.NoError(t, teampg.GrantWorker(ctx, c.pool, c.schema, role))
	_, err = teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: pool, Schema: c.schema})
	assert.NoError(t, err)

	var coordinators string
	require.NoError(t, c.pool.QueryRow(ctx, `SELECT current_user`).Scan(&coordinators))
	assert.ErrorIs(t, teampg.GrantWorker(ctx, c.pool, c.schema, coordinators), pgstore.ErrPrivileged, "the coordinators' role is no worker role")
	_, err = teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{})
	assert.ErrorIs(t, err, teampg.ErrInvalidConfig)
}
