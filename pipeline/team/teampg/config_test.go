package teampg_test

import (
	"context"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teampg"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A host's config names what it lacks, and a host whose transport schema
// is not its store's (it would never see the coordinators' work) is refused.
func TestNewHostNamesWhatIsWrong(t *testing.T) {
	_, err := teampg.NewHost(context.Background(), teampg.HostConfig{})
	require.ErrorIs(t, err, teampg.ErrInvalidConfig)
	for _, field := range []string{"Clone", "Stages", "Store"} {
		assert.Contains(t, err.Error(), field)
	}

	c := newCluster(t)
	ctx := context.Background()
	hostCfg := c.Config
	clone := c.clone(t, "host")
	hostCfg.Repo, hostCfg.Store = clone.Dir(), c.store
	stages, err := team.NewStageAgent(ctx, hostCfg)
	require.NoError(t, err)
	_, err = teampg.NewHost(ctx, teampg.HostConfig{Transport: pgtransport.HostConfig{Pool: c.pool, Schema: "elsewhere"},
		Clone: clone, Stages: stages, Store: c.store})
	require.ErrorIs(t, err, teampg.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `"elsewhere" is not the Store's schema "`+c.schema+`"`)

	// No schema: the store's.
	host, err := teampg.NewHost(ctx, teampg.HostConfig{Transport: pgtransport.HostConfig{Pool: c.pool},
		Clone: clone, Stages: stages, Store: c.store})
	require.NoError(t, err)
	assert.NotNil(t, host)
}

// A stage no host takes up fails, after the silence, with an error that
// says so and where to look, not as a host that went quiet.
func TestAStageNoHostTakesUpSaysSo(t *testing.T) {
	c := newCluster(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	leader, err := c.store.Campaign(ctx, pgstore.LeaseOptions{Name: "team", Holder: "coordinator", TTL: 10 * time.Second})
	require.NoError(t, err)
	defer func() { _ = leader.Resign(context.Background()) }()
	co, err := pgtransport.NewCoordinator(ctx, pgtransport.Config{Pool: c.pool, Store: c.store, Leader: leader})
	require.NoError(t, err)
	defer func() { _ = co.Close(context.Background()) }()
	clk := foreman.NewFakeClock(time.Date(2026, 11, 26, 9, 0, 0, 0, time.UTC))
	remote, err := teampg.NewRemote(teampg.RemoteConfig{Coordinator: co, Store: c.store, Clock: clk})
	require.NoError(t, err)

	prompt := "plan it\n" + pipeline.AssignmentBlock(pipeline.SpawnRequest{Item: "US-001", Stage: 0, Worker: "w1", Assignment: "US-001-s0-a1"})
	failed := make(chan error, 1)
	go func() {
		_, err := remote.Execute(ctx, phases.AgentRequest{TaskPrompt: prompt, WorkspacePath: t.TempDir()}, nil)
		failed <- err
	}()
	require.NoError(t, clk.BlockUntil(ctx, 1))
	clk.Advance(teampg.DefaultSilence)
	err = <-failed
	require.ErrorIs(t, err, teampg.ErrHostFailed)
	assert.Contains(t, err.Error(), "no word from any worker host within 30s")
	assert.Contains(t, err.Error(), "same database, schema and queue")
}
