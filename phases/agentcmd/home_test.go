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
