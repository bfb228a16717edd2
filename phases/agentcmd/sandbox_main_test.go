package agentcmd

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
)

// An agent in a repository's main checkout (no team: a host hands the
// driver a clone) writes a private copy of the git directory as in a
// linked worktree: its moves of other refs, its tag, hook and config are
// done in the copy and reported; its branch, and what it staged, are
// carried back; the main worktree's own files (a commit's message, a
// rebase's state) are its own and not reported.
func TestAnAgentInTheMainWorktreeWritesAPrivateCopy(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name, script string
		notes        []string
	}{
		{"cooperative: commits, amends, rebases, stages", `set -e
echo one > one.txt && git add one.txt && git commit -qm one
echo two >> one.txt && git commit -qam two && git commit -q --amend -m "two, amended"
git rebase -q main
echo staged > staged.txt && git add staged.txt`, nil},
		{"hostile: other refs, a tag, a hook, the config, HEAD", `set -e
echo one > one.txt && git add one.txt && git commit -qm one
git update-ref refs/heads/main HEAD
git tag evil
mkdir -p .git/hooks && printf "#!/bin/sh\ntouch pwned\n" > .git/hooks/post-merge && chmod +x .git/hooks/post-merge && test -x .git/hooks/post-merge
git config core.fsmonitor 'touch pwned-fsmonitor'
echo staged > staged.txt && git add staged.txt
git checkout -q --detach`, []string{
			`agentcmd: sandbox: the agent moved HEAD ("%[1]s") in its copy; HEAD stays on refs/heads/feature`,
			`agentcmd: sandbox: refused the agent's move of refs/heads/main (another branch): not carried back`,
			`agentcmd: sandbox: refused the agent's new ref refs/tags/evil: not carried back`,
			`agentcmd: sandbox: wrote "config", "hooks/" into the repository's git directory (%[2]s): a private copy, nothing real changed`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := visibleTempDir(t)
			_, err := testrepo.New(repo, "main", testrepo.Commit{Files: map[string]string{"README": "hello\n"}})
			require.NoError(t, err)
			gitOut(t, repo, "checkout", "-q", "-b", "feature")
			mainBefore := gitOut(t, repo, "rev-parse", "main")
			agent := writeScript(t, t.TempDir(), "agent", tt.script+"\n")
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: repo}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)

			committed := gitOut(t, repo, "rev-parse", "feature")
			var want []string
			for _, n := range tt.notes {
				want = append(want, sprintfIfNeeded(n, committed, filepath.Join(repo, ".git")))
			}
			assert.Equal(t, want, rec.lines(phases.StreamSandbox))

			assert.Equal(t, "refs/heads/feature", gitOut(t, repo, "symbolic-ref", "HEAD"), "the real HEAD stays on the branch")
			assert.Equal(t, mainBefore, gitOut(t, repo, "rev-parse", "main"), "main did not move")
			assert.NotEqual(t, mainBefore, committed, "the agent's commits were carried back to its branch")
			assert.Equal(t, "A  staged.txt", gitOut(t, repo, "status", "--porcelain", "--untracked-files=no"), "what it staged, carried back")
			assert.Empty(t, gitOut(t, repo, "tag", "--list"))
			assert.NoFileExists(t, filepath.Join(repo, ".git", "hooks", "post-merge"))
			assert.NotContains(t, gitOut(t, repo, "config", "--list"), "fsmonitor")
			assert.NoFileExists(t, filepath.Join(repo, "pwned"))
			gitOut(t, repo, "fsck", "--no-progress")
		})
	}
}

// sprintfIfNeeded formats n with args when it holds a verb.
func sprintfIfNeeded(n string, args ...any) string {
	if !strings.Contains(n, "%[") {
		return n
	}
	return fmt.Sprintf(n, args...)
}
