package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/proc"
	"github.com/agentforeman/foreman/phases"
)

// What executions of a process that is gone (killed before its cleanup)
// left in the temporary directory and under <LeaseDir>/decoys is removed
// by a driver's first execution; what a live process made, and what has
// no owner in its name, stays.
func TestADriverRemovesWhatKilledHostsLeftBehind(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	leases := t.TempDir()
	decoys := filepath.Join(leases, decoyDirName)
	require.NoError(t, os.MkdirAll(decoys, 0o700))
	st, err := proc.ReadStat(os.Getpid())
	require.NoError(t, err)
	// This process's pid with another start time: a process that is gone
	// (its pid reused by this one).
	gone := strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(st.StartTime+1, 10)
	live := strconv.Itoa(os.Getpid()) + "." + strconv.FormatUint(st.StartTime, 10)
	made := func(dir, name string) string {
		p := filepath.Join(dir, name)
		require.NoError(t, os.MkdirAll(filepath.Join(p, "refs", "heads"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(p, "HEAD"), []byte("x"), 0o444))
		return p
	}
	removed := []string{
		made(tmp, "foreman-sandbox-git-"+gone+"-123"),
		made(tmp, "foreman-agent-home-"+gone+"-9"),
		made(tmp, "foreman-mcp-"+gone+"-9"),
		made(decoys, "run-"+gone+"-77"),
	}
	kept := []string{
		made(tmp, "foreman-sandbox-git-"+live+"-123"),
		made(tmp, "foreman-sandbox-git-1023075687"), // an older build's: no owner
		made(tmp, "someone-else-"+gone+"-1"),
		made(decoys, "run-"+live+"-78"),
	}
	require.NoError(t, os.WriteFile(filepath.Join(tmp, "foreman-sandbox-empty-"+gone+"-5"), nil, 0o600))
	removed = append(removed, filepath.Join(tmp, "foreman-sandbox-empty-"+gone+"-5"))

	d := New(Config{Argv: []string{"true"}, LeaseDir: leases, Sandbox: Sandbox{Mode: SandboxOff}})
	_, err = d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, nil)
	require.NoError(t, err)
	for _, p := range removed {
		assert.NoFileExists(t, p)
		assert.NoDirExists(t, p)
	}
	for _, p := range kept {
		assert.DirExists(t, p)
	}
	assert.True(t, strings.HasPrefix(filepath.Base(ownerPattern("foreman-sandbox-git-")), "foreman-sandbox-git-"+live+"-"))
}
