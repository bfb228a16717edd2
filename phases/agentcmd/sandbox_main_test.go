package agentcmd

import (
	"context"
	"fmt"
	"os"
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

// The system's secret files (the password shadow, SSH host keys) are
// empty to a sandboxed agent, even one run as root, who could read them.
func TestTheSystemsSecretFilesAreEmptyInTheSandbox(t *testing.T) {
	requireSandbox(t)
	files := hostSecretFiles()
	if os.Geteuid() == 0 {
		require.Contains(t, files, "/etc/shadow", "a Linux host has one")
	}
	if len(files) == 0 {
		t.Skip("no system secret file here")
	}
	script := "for f in " + strings.Join(files, " ") + "; do printf '%s %s\\n' \"$f\" \"$(wc -c < \"$f\")\"; done"
	agent := writeScript(t, t.TempDir(), "agent", script+"\n")
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, Sandbox: Sandbox{Mode: SandboxRequired}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: visibleTempDir(t)}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	for _, f := range files {
		assert.Contains(t, rec.lines(phases.StreamText), f+" 0")
	}
}

// The system's directories of private keys (/etc/ssl/private: a TLS
// server's key) are empty to a sandboxed agent, or check, run as root.
func TestTheSystemsPrivateKeyDirectoriesAreEmptyInTheSandbox(t *testing.T) {
	requireSandbox(t)
	dirs := existingSecretDirs()
	if len(dirs) == 0 {
		t.Skip("no private key directory here")
	}
	agent := writeScript(t, t.TempDir(), "agent", "for d in "+strings.Join(dirs, " ")+"; do printf '%s %s\n' \"$d\" \"$(ls -A \"$d\" | wc -l)\"; done\n")
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, Sandbox: Sandbox{Mode: SandboxRequired}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: visibleTempDir(t)}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	for _, d := range dirs {
		assert.Contains(t, rec.lines(phases.StreamText), d+" 0")
	}
}

// The credentials a host keeps in the repository's config (a remote URL's
// password, a CI's http extraheader) are not in the agent's copy of it,
// nor in the read-only view of the real git directory; the real config
// keeps them, and the redaction is no change of the agent's.
func TestTheRepositorysCredentialsAreNotInTheAgentsCopy(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	gitOut(t, l.repo, "remote", "add", "origin", "https://bot:s3cret-token@example.invalid/team/repo.git")
	gitOut(t, l.repo, "config", "remote.origin.pushurl", "ssh://deploy:s3cret-push@example.invalid/repo.git")
	gitOut(t, l.repo, "config", "http.https://example.invalid/.extraheader", "AUTHORIZATION: bearer s3cret-header")
	gitOut(t, l.repo, "config", "url.https://oauth2:s3cret-instead@example.invalid/.insteadOf", "https://mirror.invalid/")
	gitOut(t, l.repo, "config", "credential.helper", "store --file=/var/tmp/s3cret-store")
	before := readFile(t, filepath.Join(l.repo, ".git"), "config")
	agent := writeScript(t, t.TempDir(), "agent", `common=$(git rev-parse --git-common-dir)
cat "$common/config" "$common/.foreman-host/config"
git config --get remote.origin.url`+"\n")
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	out := strings.Join(rec.lines(phases.StreamText), "\n")
	assert.NotContains(t, out, "s3cret")
	assert.Contains(t, out, "https://example.invalid/team/repo.git", "the URL without its credentials")
	assert.Contains(t, out, "ssh://example.invalid/repo.git")
	assert.Contains(t, out, `[url "https://example.invalid/"]`)
	assert.Empty(t, rec.lines(phases.StreamSandbox), "the redaction is the driver's, not the agent's change")
	assert.Equal(t, before, readFile(t, filepath.Join(l.repo, ".git"), "config"), "the real config keeps them")
}
