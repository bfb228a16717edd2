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

// git gc (and git maintenance's gc task) run by a sandboxed agent works in
// its own copy: it used to fail on the other worktrees' reflogs, whose
// admin directories are read-only in the sandbox ("cannot lock ref
// 'worktrees/B/HEAD': ... Read-only file system"). Nothing of it is an
// attempt (no note), the agent's commits land with their objects, and the
// other worktree's admin directory is as it was.
func TestGitGCInTheSandboxWorksInTheAgentsCopy(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	adminB := filepath.Join(l.repo, ".git", "worktrees", "B")
	logB := readFile(t, adminB, filepath.Join("logs", "HEAD"))
	mainBefore := l.ref(t, "main")
	agent := writeScript(t, t.TempDir(), "agent", `set -e
echo one > one.txt && git add one.txt && git commit -qm one
git gc -q
git gc -q --prune=now
echo two > two.txt && git add two.txt && git commit -qm two
git maintenance run --quiet
echo gc done
`)
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, "%s\n%s", res.Stderr, res.Output)
	assert.Equal(t, []string{"gc done"}, rec.stdoutLines())
	assert.Empty(t, rec.lines(phases.StreamSandbox), "git's own work is no attempt")

	assert.Equal(t, "two\none", gitOut(t, l.repo, "log", "--format=%s", "main..foreman/A"), "its commits landed, their objects with them")
	gitOut(t, l.repo, "fsck", "--no-progress", "--strict", "--no-reflogs")
	assert.Equal(t, mainBefore, l.ref(t, "main"))
	assert.Equal(t, logB, readFile(t, adminB, filepath.Join("logs", "HEAD")), "the other worktree's reflog untouched")
	_, err = os.Stat(filepath.Join(adminB, "gitdir"))
	assert.NoError(t, err, "the other worktree is not pruned")
}
