package team_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// An agentcmd driver whose sandbox is required where none is available
// (bwrap missing, or unable to make one) is refused by New at once, for
// every agent New takes (Config.Agent, a stage's own Agent, Reviewer), with
// the driver's reason: not a first story paused "no OS sandbox available".
func TestNewRefusesAnAgentWhoseRequiredSandboxIsMissing(t *testing.T) {
	t.Parallel()
	bwraps := map[string]string{
		"bwrap missing":         filepath.Join(t.TempDir(), "no-such-bwrap"),
		"bwrap cannot make one": "false",
	}
	fields := []struct {
		name string
		set  func(cfg *team.Config, a *agentcmd.Driver)
		who  string
	}{
		{"Agent", func(cfg *team.Config, a *agentcmd.Driver) { cfg.Agent = a }, "stage's agent"},
		{"a stage's Agent", func(cfg *team.Config, a *agentcmd.Driver) {
			cfg.Stages = team.DefaultStages(nil)
			cfg.Stages[len(cfg.Stages)-1].Agent = a
		}, "stage's agent"},
		{"Reviewer", func(cfg *team.Config, a *agentcmd.Driver) { cfg.Reviewer = a }, "the reviewer"},
	}
	for bname, bwrap := range bwraps {
		for _, fl := range fields {
			t.Run(fl.name+", "+bname, func(t *testing.T) {
				t.Parallel()
				f := newFixture(t)
				a := agentcmd.New(agentcmd.Config{Argv: []string{"sh"}, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Bwrap: bwrap}})
				fl.set(&f.cfg, a)
				_, err := team.New(context.Background(), f.cfg)
				require.Error(t, err)
				assert.ErrorIs(t, err, team.ErrAgentUnavailable)
				assert.ErrorIs(t, err, agentcmd.ErrNoSandbox)
				why, ok := strings.CutPrefix(a.Containment(), "none: ")
				require.True(t, ok, a.Containment())
				assert.Contains(t, err.Error(), why, "the driver's reason")
				assert.Contains(t, err.Error(), fl.who)
			})
		}
	}
	t.Run("where it is only wanted, New goes on", func(t *testing.T) {
		t.Parallel()
		f := newFixture(t)
		f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{"sh"}, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxAuto, Bwrap: "false"}})
		tm, err := team.New(context.Background(), f.cfg)
		require.NoError(t, err)
		require.NoError(t, tm.Close())
	})
}
