package main

import (
	"os"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
)

// -gates-offline: the gates (and -merge-check) run without a network,
// the agents keep theirs. The gate and the merge check pass only where
// their sandbox has the loopback interface alone.
func TestGatesOfflineCutsTheGatesOffTheNetwork(t *testing.T) {
	requireSandbox(t)
	t.Parallel()
	f := newFixture(t)
	require.NoError(t, os.WriteFile(f.plan, []byte(threeStories), 0o644))
	onlyLoopback := `sh -c 'test "$(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d " ")" = lo'`
	code, stdout, stderr := f.foreman(t, "-repo", f.repo, "-plan", f.plan, "-agent", shellQuote(f.agent)+" {prompt}", "-bind", f.ctl,
		"-http", "", "-gates-offline", "-gate", onlyLoopback, "-merge-check", onlyLoopback)
	require.Equal(t, exitMerged, code, "stdout:\n%s\nstderr:\n%s", stdout, stderr)
	assert.ElementsMatch(t, []string{"US-001", "US-002", "US-003"}, f.merged(t))
}

// requireSandbox skips a test that needs the OS sandbox where bwrap cannot
// make one; in CI (CI=true), which installs it, it fails instead.
func requireSandbox(t *testing.T) {
	t.Helper()
	if !agentcmd.New(agentcmd.Config{Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}).Sandboxed() {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs the OS sandbox")
		}
		t.Skip("no OS sandbox here")
	}
}
