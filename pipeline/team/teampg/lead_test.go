package teampg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

func TestLeadRefusesAnIncompleteConfig(t *testing.T) {
	_, err := teampg.Lead(context.Background(), teampg.LeadConfig{})
	assert.ErrorIs(t, err, teampg.ErrInvalidConfig)
}

// The whole system in one process: a coordinator leads, a worker host
// performs every stage in its own clone and pushes, and the leader lands
// each story once on the shared main; whether the host logs in as the
// coordinators' role or as a worker role of its own that can do nothing
// but its own claims (GrantWorker, WorkerStore).
func TestStagesRunOnAHostAndLandOnTheSharedMain(t *testing.T) {
	for _, restricted := range []bool{false, true} {
		name := "coordinators' role"
		if restricted {
			name = "worker role"
		}
		t.Run(name, func(t *testing.T) { stagesRunOnAHost(t, restricted) })
	}
}

func stagesRunOnAHost(t *testing.T, restricted bool) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	hostPool, hostStore := c.pool, store.Store(c.store)
	if restricted {
		var role string
		hostPool, role = c.newRole(t, true)
		require.NoError(t, pgtransport.CheckWorker(ctx, hostPool, c.schema, ""), "%s can do nothing else", role)
		ws, err := teampg.OpenWorkerStore(ctx, teampg.WorkerStoreConfig{Pool: hostPool, Schema: c.schema})
		require.NoError(t, err)
		hostStore = ws
	}
	hostCfg := c.Config
	hostClone := c.clone(t, "host")
	hostCfg.Repo, hostCfg.Store = hostClone.Dir(), hostStore
	stages, err := team.NewStageAgent(ctx, hostCfg)
	require.NoError(t, err)
	host, err := teampg.NewHost(ctx, teampg.HostConfig{
		Transport: pgtransport.HostConfig{Pool: hostPool, Schema: c.schema, Capacity: 2, PollInterval: 100 * time.Millisecond},
		Clone:     hostClone, Stages: stages, Store: hostStore,
	})
	require.NoError(t, err)
	hostCtx, stopHost := context.WithCancel(ctx)
	hostDone := make(chan error, 1)
	go func() { hostDone <- host.Run(hostCtx) }()
	defer func() { stopHost(); <-hostDone }()

	lead, err := teampg.Lead(ctx, teampg.LeadConfig{Pool: c.pool, Store: c.store, Clone: c.clone(t, "coordinator"),
		Lease: lease("coordinator"), Transport: pgtransport.Config{PollInterval: 100 * time.Millisecond}})
	require.NoError(t, err)
	defer func() { assert.NoError(t, lead.Close(context.Background())) }()
	assert.Contains(t, gitLog(t, c, gitremote.FenceRef), "Foreman-Leader-Term: 1", "the leader fenced the shared repository")

	cfg := c.Config
	// The coordinator runs no agent and no gate: the hosts have them.
	cfg.Agent, cfg.Gates = nil, phases.GatePlan{}
	lead.Configure(&cfg)
	tm, err := team.New(lead.Context(), cfg)
	require.NoError(t, err)
	defer tm.Close()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "US-001", Title: "one"}, team.Story{ID: "US-002", Title: "two", After: []foreman.ItemID{"US-001"}}))
	res, err := tm.Run(lead.Context())
	require.NoError(t, err)
	assert.Equal(t, 2, res.Merged, "%+v", res)
	assert.Equal(t, []string{"US-001", "US-002"}, c.merged(t), "each story once, in dependency order")

	// Each stage's result, read by the leader, is not kept.
	recs, err := c.store.List(ctx, "team.stage-result")
	require.NoError(t, err)
	assert.Empty(t, recs)
	// The host recorded what the flow checks (the board) and each build's
	// starting point, through whichever store it had.
	for _, kind := range []string{"team.board", "team.base"} {
		recs, err := c.store.List(ctx, kind)
		require.NoError(t, err)
		assert.NotEmpty(t, recs, kind)
	}
}

// A leader paused after its last check of the lease and before its push
// (the window no database fence can close) is stopped by the shared
// repository's fence once a newer leader has taken over.
func TestAnOldLeaderPausedBeforeItsPushLandsNothing(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	worker := c.clone(t, "worker")
	wt, err := worker.Checkout(ctx, "US-001")
	require.NoError(t, err)
	writeFile(t, wt.Path, "US-001.txt", "done\n")
	_, err = worker.Push(ctx, "US-001", "US-001: work")
	require.NoError(t, err)

	oldClone := c.clone(t, "old")
	old, err := teampg.Lead(ctx, teampg.LeadConfig{Pool: c.pool, Store: c.store, Clone: oldClone, Lease: lease("old")})
	require.NoError(t, err)
	require.NoError(t, old.Close(ctx)) // stands for a lease that ran out while the process was stopped
	next, err := teampg.Lead(ctx, teampg.LeadConfig{Pool: c.pool, Store: c.store, Clone: c.clone(t, "next"), Lease: lease("next")})
	require.NoError(t, err)
	defer func() { _ = next.Close(context.Background()) }()
	require.Greater(t, next.Leader.Term(), old.Leader.Term())

	// The old leader's merge, through its Git seam: the store's fence stops it first.
	_, err = old.Git.Merge(ctx, pipeline.MergeRequest{Item: "US-001"})
	assert.ErrorIs(t, err, pgstore.ErrFenced)
	// Past that check (it was paused after it), the push is refused by git.
	_, err = teampg.Git{Clone: oldClone}.Merge(ctx, pipeline.MergeRequest{Item: "US-001"})
	var fenced *gitremote.FencedError
	require.ErrorAs(t, err, &fenced)
	assert.Equal(t, old.Leader.Term(), fenced.Term)
	assert.Equal(t, next.Leader.Term(), fenced.Newer)
	assert.Empty(t, c.merged(t), "nothing landed")

	out, err := next.Git.Merge(ctx, pipeline.MergeRequest{Item: "US-001", Title: "one"})
	require.NoError(t, err)
	assert.False(t, out.Already)
	assert.Equal(t, []string{"US-001"}, c.merged(t))
}
