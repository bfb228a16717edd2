package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// The home kept for a workspace goes with RemoveHome, a read-only
// directory the agent left in it included; another workspace's stays.
func TestRemoveHome(t *testing.T) {
	requireSandbox(t)
	leases := t.TempDir()
	agent := writeScript(t, t.TempDir(), "agent", `mkdir -p "$HOME/ro" && echo kept > "$HOME/ro/f" && chmod 500 "$HOME/ro"`)
	d := New(Config{Argv: []string{agent}, LeaseDir: leases, Sandbox: Sandbox{Mode: SandboxRequired}})
	a, b := t.TempDir(), t.TempDir()
	for _, ws := range []string{a, b} {
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws}, nil)
		require.NoError(t, err)
		require.True(t, res.Success, res.Stderr)
	}
	homes := func() []string {
		got, err := filepath.Glob(filepath.Join(leases, "homes", "*", "ro", "f"))
		require.NoError(t, err)
		return got
	}
	require.Len(t, homes(), 2)

	require.NoError(t, d.RemoveHome(context.Background(), a))
	left := homes()
	require.Len(t, left, 1)
	key, _, err := leaseKey(b)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(leases, "homes", key, "ro", "f"), left[0], "the other workspace's home stays")
	require.NoError(t, d.RemoveHome(context.Background(), a), "again: nothing to do")

	// Without a kept home, nothing to do.
	require.NoError(t, New(Config{Argv: []string{agent}}).RemoveHome(context.Background(), b))
	_, err = os.Stat(left[0])
	require.NoError(t, err)
}

// A sandboxed agent's HOME names nothing of the host's: not the team's
// state directory, under whose lease directory the host keeps the home
// (<LeaseDir>/homes/<hash>), nor that hash. The host keeps the same
// directory across executions (a CLI finds its sessions again), a Bind
// with Target "~/..." is under the agent's HOME, and the mount point under
// the hidden /run is no write of the agent's.
func TestTheAgentsHomeNamesNothingOfTheHost(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	cfgDir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(cfgDir, "settings"), []byte("bound\n"), 0o644))
	agent := writeScript(t, t.TempDir(), "agent", `set -e
echo "HOME=$HOME"
cd "$HOME" && echo "PWD=$(pwd -P)"
n=$(cat runs 2>/dev/null || echo 0); echo $((n+1)) > runs
echo "CFG=$(cat "$HOME/.cli/settings")"
`)
	d := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(),
		Sandbox: Sandbox{Mode: SandboxRequired, Binds: []Bind{{Source: cfgDir, Target: "~/.cli"}}}})
	for i := 1; i <= 2; i++ {
		rec := &recorder{}
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
		require.NoError(t, err)
		require.True(t, res.Success, res.Stderr)
		out := rec.stdoutLines()
		assert.Equal(t, []string{"HOME=" + sandboxHome, "PWD=" + sandboxHome, "CFG=bound"}, out)
		assert.Empty(t, rec.lines(phases.StreamSandbox), "no write of the agent's")
		for _, line := range out {
			assert.NotContains(t, line, l.stateDir)
			assert.NotContains(t, line, ".foreman")
		}
	}
	key, _, err := leaseKey(l.wtA)
	require.NoError(t, err)
	data, err := os.ReadFile(filepath.Join(l.leases, "homes", key, "runs"))
	require.NoError(t, err)
	assert.Equal(t, "2\n", string(data), "the host's directory, kept across executions")
}
