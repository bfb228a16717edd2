package agentcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// The repository's git directory is the agent's private copy: what it
// does there to other refs and to git's files (config, hooks, HEAD) is not
// carried back, and each is a StreamSandbox note (a kind no parser of agent
// output reports), while its own branch still moves, even when the agent
// packs it; git's own housekeeping is no note.
func TestSandboxNotesOtherRefsTheAgentTouched(t *testing.T) {
	requireSandbox(t)
	const gitDir = `"$(git rev-parse --git-common-dir)"`
	const private = "into the repository's git directory (%s): a private copy, nothing real changed"
	tests := []struct {
		name, script string
		notes        []string
	}{
		{"moved", `git update-ref refs/heads/foreman/B HEAD`,
			[]string{"refused the agent's move of refs/heads/foreman/B (another branch): not carried back"}},
		{"made", `git branch foreman/NEW`,
			[]string{"refused the agent's new ref refs/heads/foreman/NEW: not carried back"}},
		{"deleted by rm", `rm ` + gitDir + `/refs/heads/foreman/B`,
			[]string{"refused the agent's deletion of refs/heads/foreman/B (another branch): not carried back"}},
		{"main deleted by git", `git update-ref -d refs/heads/main`,
			[]string{"refused the agent's deletion of refs/heads/main (another branch): not carried back"}},
		{"tag", `git tag -a -m v v9`, []string{"refused the agent's new ref refs/tags/v9: not carried back"}},
		{"config", `git config core.hooksPath /nowhere`, []string{"wrote \"config\" " + private}},
		{"main worktree's HEAD", `git --git-dir=` + gitDir + ` symbolic-ref HEAD refs/heads/foreman/B`,
			[]string{"wrote \"HEAD\" " + private}},
		{"hook made executable, one removed", `chmod +x ` + gitDir + `/hooks/pre-push; rm ` + gitDir + `/hooks/post-update`,
			[]string{"wrote \"hooks/pre-push\", \"hooks/post-update (removed)\" " + private}},
		{"hooks directory removed", `rm -r ` + gitDir + `/hooks`, []string{"wrote \"hooks (removed)\" " + private}},
		{"config written and put back, a hook made and removed", `cp ` + gitDir + `/config "$HOME/c" && git config x.y z && cp "$HOME/c" ` + gitDir + `/config &&
echo x > ` + gitDir + `/hooks/h && rm ` + gitDir + `/hooks/h`,
			[]string{"wrote \"config (put back)\", \"hooks/h (removed)\" " + private}},
		{"refs packed, its own among them", `git pack-refs --all --prune`, nil},
		{"fetch, fsck --lost-found", `git fetch -q . main && echo dangling | git hash-object -w --stdin >/dev/null &&
git fsck --no-progress --lost-found >/dev/null && test -d ` + gitDir + `/lost-found`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTeamLayout(t)
			hooks := filepath.Join(l.repo, ".git", "hooks")
			require.NoError(t, os.MkdirAll(hooks, 0o755))
			for _, hook := range []string{"pre-push", "post-update"} {
				require.NoError(t, os.WriteFile(filepath.Join(hooks, hook), []byte("#!/bin/sh\n"), 0o644))
			}
			bBefore, mainBefore := l.ref(t, "foreman/B"), l.ref(t, "main")
			agent := writeScript(t, t.TempDir(), "agent", "set -e\n"+
				`echo x > own.txt && git add own.txt && git commit -qm own`+"\n"+tt.script+"\n")
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)
			var want []string
			for _, note := range tt.notes {
				if strings.Contains(note, "%s") {
					note = fmt.Sprintf(note, filepath.Join(l.repo, ".git"))
				}
				want = append(want, "agentcmd: sandbox: "+note)
			}
			assert.Equal(t, want, rec.lines(phases.StreamSandbox))
			assert.Equal(t, mainBefore, l.ref(t, "main"))
			assert.Empty(t, gitOut(t, l.repo, "tag", "--list"))
			assert.NotContains(t, gitOut(t, l.repo, "config", "--list"), "hookspath")
			assert.Equal(t, "refs/heads/main", gitOut(t, l.repo, "symbolic-ref", "HEAD"))
			assert.FileExists(t, filepath.Join(hooks, "post-update"))
			assert.Equal(t, bBefore, l.ref(t, "foreman/B"))
			assert.Empty(t, gitOut(t, l.repo, "branch", "--list", "foreman/NEW"))
			assert.Equal(t, "own", gitOut(t, l.repo, "log", "-1", "--format=%s", "foreman/A"), "its own branch moved")
			for _, note := range want {
				assert.NotContains(t, rec.lines(phases.StreamStderr), note)
			}
		})
	}
}

// The agent sees the host's refs as they are while it runs (its copy of
// the git directory links them): main moved by a landing story meanwhile
// is main's new value for it, and no note (not even once the agent packed
// the refs with main's new value, nor for branches the host made or
// deleted meanwhile); its own commits still land on its branch alone.
func TestASandboxedAgentSeesTheHostsRefsMove(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	ctl := t.TempDir()
	for _, fifo := range []string{"started", "moved"} {
		require.NoError(t, syscall.Mkfifo(filepath.Join(ctl, fifo), 0o644))
	}
	agent := writeScript(t, t.TempDir(), "agent", `set -e
echo "main before $(git rev-parse main)"
echo started > "$CTL/started"
read x < "$CTL/moved"
echo "main after $(git rev-parse main)"
git pack-refs --all --prune
echo x > own.txt && git add own.txt && git commit -qm own
git rebase -q main && echo rebased
`)
	done := make(chan struct{})
	var res phases.AgentResult
	var err error
	rec := &recorder{}
	go func() {
		defer close(done)
		res, err = New(Config{Argv: []string{agent}, Env: append(identity(), "CTL="+ctl), Sandbox: Sandbox{Mode: SandboxRequired}}).
			Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA, Writable: []string{ctl}}, rec.callback)
	}()
	started, err2 := os.ReadFile(filepath.Join(ctl, "started"))
	require.NoError(t, err2)
	require.Equal(t, "started\n", string(started))
	require.NoError(t, os.WriteFile(filepath.Join(l.repo, "landed.txt"), []byte("landed\n"), 0o644))
	gitOut(t, l.repo, "add", "landed.txt")
	gitOut(t, l.repo, "-c", "user.name=Host", "-c", "user.email=host@example.invalid", "commit", "-qm", "a story landed")
	moved := l.ref(t, "main")
	gitOut(t, l.repo, "branch", "foreman/C", "main") // a story starts
	gitOut(t, l.repo, "worktree", "remove", "--force", l.wtB)
	gitOut(t, l.repo, "branch", "-D", "foreman/B") // a story lands and goes
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "moved"), []byte("go\n"), 0o644))
	<-done
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)

	out := rec.lines(phases.StreamText)
	assert.Contains(t, out, "main after "+moved, "the agent saw main move")
	assert.Contains(t, out, "rebased")
	assert.Empty(t, rec.lines(phases.StreamSandbox), "the host's moves (main, a branch made, one deleted) are not the agent's")
	assert.Equal(t, moved, gitOut(t, l.repo, "rev-parse", "foreman/A~1"), "its branch, rebased onto the new main, carried back")
	assert.Equal(t, moved, l.ref(t, "main"))
}
