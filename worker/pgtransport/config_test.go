package pgtransport_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
)

// A bad setting is refused before anything connects, and the error names
// the field and its value.
func TestABadSettingIsRefusedByName(t *testing.T) {
	ctx := context.Background()
	pool, err := pgxpool.New(ctx, "host=/nonexistent-foreman-test dbname=none") // connects lazily: never here
	require.NoError(t, err)
	t.Cleanup(pool.Close)
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true}, nil
	})
	for want, cfg := range map[string]pgtransport.HostConfig{
		"HostConfig.Capacity is negative (-1)":      {Capacity: -1},
		"HostConfig.PollInterval is negative (-1s)": {PollInterval: -time.Second},
		"HostConfig.Linger is negative (-5ms)":      {Linger: -5 * time.Millisecond},
		"HostConfig.Schema: ":                       {Schema: "bad name"},
		"HostConfig.Runtime.Agent is nil":           {Runtime: worker.RuntimeConfig{}},
	} {
		cfg.Pool = pool
		if cfg.Runtime.Agent == nil && want != "HostConfig.Runtime.Agent is nil" {
			cfg.Runtime.Agent = agent
		}
		_, err := pgtransport.NewHost(ctx, cfg)
		assert.ErrorIs(t, err, pgtransport.ErrInvalidConfig, want)
		assert.ErrorContains(t, err, want)
	}
}
