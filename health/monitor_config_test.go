package health_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/health/healthmock"
)

func TestMonitorWatchValidation(t *testing.T) {
	f := newFixture(t, nil)
	tests := []struct {
		name string
		s    health.Subject
		want error
	}{
		{"duplicate item", health.Subject{Item: "PROJ-42", Assignment: "b1"}, health.ErrDuplicate},
		{"duplicate assignment", health.Subject{Item: "PROJ-43", Assignment: "a1"}, health.ErrDuplicate},
		{"invalid item", health.Subject{Item: "../x", Assignment: "b1"}, foreman.ErrInvalidID},
		{"invalid assignment", health.Subject{Item: "PROJ-43", Assignment: ""}, foreman.ErrInvalidID},
		{"invalid worker", health.Subject{Item: "PROJ-43", Assignment: "b1", Worker: "a/b"}, foreman.ErrInvalidID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			assert.ErrorIs(t, f.m.Watch(tt.s), tt.want)
		})
	}
	assert.Error(t, f.m.Watch(health.Subject{Item: "PROJ-43", Assignment: "b1", Stage: -1}))
	assert.True(t, f.m.Forget("PROJ-42"))
	assert.False(t, f.m.Forget("PROJ-42"))
	require.NoError(t, f.m.Watch(health.Subject{Item: "PROJ-42", Assignment: "a1", Crashes: 1}))
	st, ok := f.m.State("PROJ-42")
	require.True(t, ok)
	assert.Equal(t, 1, st.Crashes, "restored crash count")
}

func TestMonitorConfigDefaults(t *testing.T) {
	base := func() health.MonitorConfig {
		ctrl := gomock.NewController(t)
		return health.MonitorConfig{Prober: healthmock.NewMockProber(ctrl), ItemChecker: healthmock.NewMockItemChecker(ctrl),
			Escalator: healthmock.NewMockEscalator(ctrl), Resumer: healthmock.NewMockResumer(ctrl),
			Checkpoints: healthmock.NewMockCheckpointLoader(ctrl)}
	}
	tests := []struct {
		name         string
		edit         func(*health.MonitorConfig)
		budget       int
		probeTimeout time.Duration
	}{
		{"zero values", func(*health.MonitorConfig) {}, 1, 2 * time.Minute},
		{"explicit", func(c *health.MonitorConfig) { c.CrashBudget, c.ProbeTimeout = 3, time.Second }, 3, time.Second},
		{"negative budget means none", func(c *health.MonitorConfig) { c.CrashBudget = -5 }, 0, 2 * time.Minute},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base()
			tt.edit(&cfg)
			m, err := health.NewMonitor(cfg)
			require.NoError(t, err)
			defer m.Close()
			got := m.Config()
			assert.Equal(t, tt.budget, got.CrashBudget)
			assert.Equal(t, tt.probeTimeout, got.ProbeTimeout)
			assert.NotNil(t, got.Clock)
			assert.NotNil(t, got.Logger)
			assert.False(t, got.DisableLostCompletionSynthesis, "lost completions are synthesized by default")
		})
	}
	cfg := base()
	cfg.Resumer = nil
	_, err := health.NewMonitor(cfg)
	assert.ErrorIs(t, err, health.ErrMissingService)
	cfg = base()
	cfg.DoneMarkers = healthmock.NewMockDoneMarkers(gomock.NewController(t))
	_, err = health.NewMonitor(cfg)
	assert.ErrorIs(t, err, health.ErrMissingService, "DoneMarkers needs a Completer")
}

func TestMonitorCloseTwiceStopsTimers(t *testing.T) {
	f := newFixture(t, nil)
	f.expectProbe("a1", nil)
	_, err := f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	require.Equal(t, 1, f.clk.Pending())
	require.NoError(t, f.m.Close())
	require.NoError(t, f.m.Close())
	assert.Zero(t, f.clk.Pending())
	f.clk.Advance(time.Hour) // nothing fires; gomock would fail on an unexpected call
	_, err = f.m.Idle(context.Background(), "a1")
	assert.ErrorIs(t, err, health.ErrClosed)
	assert.ErrorIs(t, f.m.Watch(health.Subject{Item: "X", Assignment: "x"}), health.ErrClosed)
}

func TestMonitorCancelledContext(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := f.m.Idle(ctx, "a1")
	assert.ErrorIs(t, err, context.Canceled)
	_, err = f.m.Retry(context.Background(), "NOPE")
	assert.ErrorIs(t, err, health.ErrStaleAssignment)
}
