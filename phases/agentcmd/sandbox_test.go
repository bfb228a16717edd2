package agentcmd

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
)

// requireSandbox skips a test that needs bwrap where it is not installed;
// in CI (CI=true), which installs it, it fails instead.
func requireSandbox(t *testing.T) {
	t.Helper()
	d := New(Config{Sandbox: Sandbox{Mode: SandboxRequired}})
	if d.Sandboxed() {
		return
	}
	if os.Getenv("CI") == "true" {
		t.Fatalf("CI needs the OS sandbox: %s", d.Containment())
	}
	t.Skipf("no OS sandbox here: %s", d.Containment())
}

// gitOut runs git in dir with the tests' isolation and returns its output.
func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testrepo.GitEnv()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %v: %s", args, out)
	return strings.TrimSpace(string(out))
}

// teamLayout is a repository laid out the way a team lays it out: the
// main checkout on main, two stories' worktrees under .worktrees on their
// foreman/<id> branches, and the team's state in .foreman (a database, the
// result directory, the leases).
type teamLayout struct {
	repo, stateDir, results, leases string
	wtA, wtB                        string
}

// visibleTempDir is a temporary directory outside /tmp where it can be
// (/var/tmp): a sandboxed agent sees it as the host has it, read-only,
// where under /tmp it would see nothing at all (its /tmp is its own).
func visibleTempDir(t *testing.T) string {
	t.Helper()
	dir, err := os.MkdirTemp("/var/tmp", "foreman-sandbox-test-")
	if err != nil {
		dir = t.TempDir()
	} else {
		t.Cleanup(func() { _ = os.RemoveAll(dir) })
	}
	dir, err = filepath.EvalSymlinks(dir)
	require.NoError(t, err)
	return dir
}

func newTeamLayout(t *testing.T) teamLayout {
	t.Helper()
	repo := visibleTempDir(t)
	_, err := testrepo.New(repo, "main", testrepo.Commit{Files: map[string]string{"README": "hello\n"}})
	require.NoError(t, err)
	l := teamLayout{repo: repo, stateDir: filepath.Join(repo, ".foreman")}
	l.results, l.leases = filepath.Join(l.stateDir, "results"), filepath.Join(l.stateDir, "leases")
	for _, d := range []string{l.results, l.leases} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	require.NoError(t, os.WriteFile(filepath.Join(l.stateDir, "foreman.db"), []byte("state"), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".git", "info", "exclude"), []byte(".foreman/\n.worktrees/\n"), 0o644))
	l.wtA, l.wtB = filepath.Join(repo, ".worktrees", "A"), filepath.Join(repo, ".worktrees", "B")
	gitOut(t, repo, "worktree", "add", "-q", "-b", "foreman/A", l.wtA)
	gitOut(t, repo, "worktree", "add", "-q", "-b", "foreman/B", l.wtB)
	return l
}

func (l teamLayout) ref(t *testing.T, ref string) string {
	return gitOut(t, l.repo, "rev-parse", ref)
}

// identity lets the agent commit (the tests' git has no global config).
func identity() []string {
	return []string{"GIT_AUTHOR_NAME=Agent", "GIT_AUTHOR_EMAIL=agent@example.invalid",
		"GIT_COMMITTER_NAME=Agent", "GIT_COMMITTER_EMAIL=agent@example.invalid"}
}

// A hostile agent tries, from its worktree, everything the sandbox must
// stop; each attempt prints "<name> ok" or "<name> refused". Then it does
// its job, an edit and a commit, which must land on its branch.
func TestSandboxContainsAHostileAgent(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	hostHome := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(hostHome, "credentials"), []byte("hunter2"), 0o600))
	t.Setenv("HOME", hostHome)
	t.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	t.Setenv("DATABASE_URL", "postgres://u:dbpassword@127.0.0.1/x")
	t.Setenv("UNLISTED_TOKEN", "unlisted-secret")
	hostTmp := filepath.Join(os.TempDir(), "foreman-sandbox-test-"+filepath.Base(l.repo))
	require.NoError(t, os.WriteFile(hostTmp, []byte("host tmp"), 0o644))
	t.Cleanup(func() { _ = os.Remove(hostTmp) })

	mainBefore, bBefore := l.ref(t, "main"), l.ref(t, "foreman/B")
	common := filepath.Join(l.repo, ".git")
	agent := writeScript(t, t.TempDir(), "agent", `
try() { name=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try write-main-checkout sh -c 'echo evil > "$REPO/README"'
try new-file-main-checkout sh -c 'echo evil > "$REPO/EVIL"'
try write-other-worktree sh -c 'echo evil > "$REPO/.worktrees/B/EVIL"'
try write-state-db sh -c 'echo evil > "$REPO/.foreman/foreman.db"'
try read-state-db grep -qx state "$REPO/.foreman/foreman.db"
try write-lease sh -c 'echo evil > "$REPO/.foreman/leases/evil.lease"'
try read-host-home cat "$HOSTHOME/credentials"
try read-host-tmp cat "$HOSTTMP"
try write-host-home sh -c 'echo evil > "$HOSTHOME/planted"'
try tag git tag evil
try config git config core.hooksPath "$REPO/evil-hooks"
try hook sh -c 'mkdir -p "$COMMON/hooks" && printf "#!/bin/sh\ntouch $REPO/pwned\n" > "$COMMON/hooks/post-merge" && chmod +x "$COMMON/hooks/post-merge"'
try dotgit sh -c 'echo "gitdir: /tmp/evil" > .git'
try commondir sh -c 'echo /tmp/evil > "$COMMON/worktrees/A/commondir"'
try remount mount -o remount,rw /
env | grep -q -e webhook-secret -e dbpassword -e unlisted-secret && echo "env leaked" || echo "env clean"
[ "$HOME" != "$HOSTHOME" ] && touch "$HOME/.agent-config" && echo "home own"
[ "$IS_SANDBOX" = 1 ] && echo "is sandbox"
echo work > work.txt && git add work.txt && git commit -q -m "the agent's work" && echo "commit ok"
try update-ref-main git update-ref refs/heads/main HEAD
try move-other-branch git update-ref refs/heads/foreman/B HEAD
try push-main git push -q . HEAD:main
try branch-force-main git branch -f main HEAD
echo '{"outcome":"done"}' > "$FOREMAN_RESULT" && echo "result ok"
git symbolic-ref HEAD refs/heads/main && echo "head moved"
`)
	result := filepath.Join(l.results, "A-a1.json")
	d := New(Config{
		Argv: []string{agent}, LeaseDir: l.leases,
		Sandbox: Sandbox{Mode: SandboxRequired, Hide: []string{l.stateDir}},
		Env: append(identity(), "REPO="+l.repo, "HOSTHOME="+hostHome, "HOSTTMP="+hostTmp, "COMMON="+common,
			"FOREMAN_RESULT="+result),
	})
	rec := &recorder{}
	res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA, Writable: []string{l.results}}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, "stdout %s\nstderr %s", res.Output, res.Stderr)

	out := rec.lines(phases.StreamText)
	for _, attempt := range []string{"write-main-checkout", "new-file-main-checkout", "write-other-worktree",
		"read-state-db", "read-host-home", "read-host-tmp", "branch-force-main", "dotgit", "commondir", "remount"} {
		assert.Contains(t, out, attempt+" refused")
	}
	// The repository's git directory is a private copy: git's writes there
	// succeed, change nothing real, and are each reported.
	for _, attempt := range []string{"tag", "config", "hook", "update-ref-main", "push-main"} {
		assert.Contains(t, out, attempt+" ok")
	}
	for _, note := range []string{
		"refused the agent's move of refs/heads/main (another branch): not carried back",
		"refused the agent's new ref refs/tags/evil: not carried back",
		fmt.Sprintf("wrote \"config\", \"hooks/\" into the repository's git directory (%s): a private copy, nothing real changed", common),
	} {
		assert.Contains(t, rec.lines(phases.StreamSandbox), "agentcmd: sandbox: "+note)
	}
	// The hidden directories are decoys: the writes succeed there, change
	// nothing real, and are each reported once the agent is gone.
	for _, attempt := range []string{"write-state-db", "write-lease", "write-host-home"} {
		assert.Contains(t, out, attempt+" ok")
	}
	assert.NoFileExists(t, filepath.Join(hostHome, "planted"))
	decoy := "agentcmd: sandbox: wrote %q into the hidden %s (%s): a decoy, nothing real changed"
	assert.Contains(t, rec.lines(phases.StreamSandbox), fmt.Sprintf(decoy, "foreman.db", "directory", l.stateDir))
	assert.Contains(t, rec.lines(phases.StreamSandbox), fmt.Sprintf(decoy, "evil.lease", "lease directory", l.leases))
	assert.Contains(t, rec.lines(phases.StreamSandbox), fmt.Sprintf(decoy, "planted", "host's home", hostHome))
	decoys, err := os.ReadDir(filepath.Join(l.leases, decoyDirName))
	require.NoError(t, err)
	assert.Empty(t, decoys, "the decoys are removed")
	assert.Contains(t, out, "move-other-branch ok", "its private copy of the branches' directory")
	assert.Equal(t, bBefore, l.ref(t, "foreman/B"), "another story's branch did not move")
	assert.Contains(t, rec.lines(phases.StreamSandbox),
		"agentcmd: sandbox: refused the agent's move of refs/heads/foreman/B (another branch): not carried back", "and the transcript says so")

	assert.Contains(t, out, "env clean")
	assert.Contains(t, out, "home own")
	assert.Contains(t, out, "is sandbox")
	assert.Contains(t, out, "commit ok")
	assert.Contains(t, out, "result ok")
	assert.Contains(t, out, "head moved")

	// The host's state is intact.
	assert.Equal(t, mainBefore, l.ref(t, "main"))
	assert.Equal(t, "hello\n", readFile(t, l.repo, "README"))
	assert.NoFileExists(t, filepath.Join(l.repo, "EVIL"))
	assert.NoFileExists(t, filepath.Join(l.wtB, "EVIL"))
	assert.NoFileExists(t, filepath.Join(l.repo, "pwned"))
	assert.Equal(t, "state", readFile(t, l.stateDir, "foreman.db"))
	assert.Empty(t, leaseFiles(t, l.leases))
	assert.Empty(t, gitOut(t, l.repo, "tag", "--list"))
	assert.NotContains(t, gitOut(t, l.repo, "config", "--list"), "hookspath")
	assert.NoFileExists(t, filepath.Join(common, "hooks", "post-merge"))
	assert.Equal(t, `{"outcome":"done"}`+"\n", readFile(t, l.results, "A-a1.json"))

	// Its work landed on its branch, and its worktree is on that branch.
	assert.Equal(t, "refs/heads/foreman/A", gitOut(t, l.wtA, "symbolic-ref", "HEAD"), "HEAD put back")
	assert.Equal(t, "the agent's work", gitOut(t, l.repo, "log", "-1", "--format=%s", "foreman/A"))
	assert.Equal(t, mainBefore, gitOut(t, l.repo, "rev-parse", "foreman/A~1"))
	assert.Empty(t, gitOut(t, l.wtA, "status", "--porcelain"))
	assert.Contains(t, rec.lines(phases.StreamSandbox), "agentcmd: sandbox: the agent moved HEAD (\"ref: refs/heads/main\"); put back on refs/heads/foreman/A")
	gitOut(t, l.repo, "fsck", "--no-progress")
}

// An ordinary agent edits, commits twice in two executions (its branch
// carried back each time) and keeps its home across them.
func TestSandboxedAgentCommitsAcrossExecutions(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	agent := writeScript(t, t.TempDir(), "agent", `
n=$(cat "$HOME/runs" 2>/dev/null || echo 0); n=$((n+1)); echo $n > "$HOME/runs"
echo "run $n" >> log.txt && git add log.txt && git commit -q -m "run $n" && echo "run $n committed"
`)
	d := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}})
	for i := 1; i <= 2; i++ {
		res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, nil)
		require.NoError(t, err)
		require.True(t, res.Success, res.Stderr)
	}
	assert.Equal(t, "run 2\nrun 1", gitOut(t, l.repo, "log", "--format=%s", "main..foreman/A"))
	assert.Equal(t, "run 1\nrun 2\n", readFile(t, l.wtA, "log.txt"))
	assert.Empty(t, gitOut(t, l.wtA, "status", "--porcelain"))
	homes, err := filepath.Glob(filepath.Join(l.leases, "homes", "*", "runs"))
	require.NoError(t, err)
	require.Len(t, homes, 1, "one home for the workspace, kept")
	assert.Equal(t, "2\n", readFile(t, filepath.Dir(homes[0]), "runs"))
}

// A forged branch value (no object, or not a commit) is refused: the
// branch stays where it was, and the transcript says why.
func TestSandboxRefusesAForgedBranch(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	before := l.ref(t, "foreman/A")
	blob := gitOut(t, l.repo, "hash-object", "-w", "README")
	tests := []struct{ name, value, note string }{
		{"no object name", "ref: refs/heads/main", "is no object name"},
		{"missing object", strings.Repeat("ab", 20), "refused the agent's refs/heads/foreman/A"},
		{"a blob", blob, "refused the agent's refs/heads/foreman/A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agent := writeScript(t, t.TempDir(), "agent", `printf '%s\n' "$VALUE" > "$COMMON/refs/heads/foreman/A"`)
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, Sandbox: Sandbox{Mode: SandboxRequired},
				Env: []string{"VALUE=" + tt.value, "COMMON=" + filepath.Join(l.repo, ".git")}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)
			assert.Equal(t, before, l.ref(t, "foreman/A"))
			require.NotEmpty(t, rec.lines(phases.StreamSandbox))
			assert.Contains(t, strings.Join(rec.lines(phases.StreamSandbox), "\n"), tt.note)
		})
	}
}

func TestContainmentSaysWhy(t *testing.T) {
	off := New(Config{Sandbox: Sandbox{Mode: SandboxOff}})
	assert.Equal(t, "none: sandbox turned off (Config.Sandbox.Mode)", off.Containment())
	assert.False(t, off.Sandboxed())

	t.Setenv(SandboxEnv, "off")
	assert.Equal(t, "none: sandbox turned off (FOREMAN_SANDBOX)", New(Config{}).Containment())

	missing := New(Config{Sandbox: Sandbox{Mode: SandboxRequired, Bwrap: "no-such-bwrap-xyz"}})
	assert.Contains(t, missing.Containment(), "none: no-such-bwrap-xyz not found")
	_, err := missing.Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, nil)
	require.ErrorIs(t, err, ErrNoSandbox)

	auto := New(Config{Argv: []string{"true"}, Sandbox: Sandbox{Mode: SandboxAuto, Bwrap: "no-such-bwrap-xyz"}})
	res, err := auto.Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, nil)
	require.NoError(t, err, "auto runs unsandboxed where there is no sandbox")
	assert.True(t, res.Success)
	assert.False(t, auto.Sandboxed())
}

// A bind whose source is gone fails before any agent runs, with the cause.
func TestSandboxSetupFailureIsAnError(t *testing.T) {
	requireSandbox(t)
	marker := filepath.Join(t.TempDir(), "ran")
	_, err := New(Config{Argv: []string{"touch", marker}, Sandbox: Sandbox{Mode: SandboxRequired,
		Binds: []Bind{{Source: filepath.Join(t.TempDir(), "missing")}}}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, nil)
	var se *SandboxError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "prepare", se.Stage)
	assert.NoFileExists(t, marker)

	// bwrap's own failure: a target it cannot make.
	_, err = New(Config{Argv: []string{"touch", marker}, Sandbox: Sandbox{Mode: SandboxRequired,
		Binds: []Bind{{Source: t.TempDir(), Target: "/proc/sys/no-such-dir/x"}}}}).
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: t.TempDir()}, nil)
	require.ErrorAs(t, err, &se)
	assert.Equal(t, "bwrap", se.Stage)
	assert.Contains(t, se.Error(), "bwrap: ")
	assert.NoFileExists(t, marker)
}

// A sandboxed agent dies with its host: nothing is left for a reaper.
func TestASandboxedAgentDiesWithItsHost(t *testing.T) {
	requireSandbox(t)
	workspace, leaseDir := t.TempDir(), t.TempDir()
	agent := writeScript(t, t.TempDir(), "agent", "sleep 1000 &\nwait\n")
	helper := exec.Command(os.Args[0], "-test.run=^TestLeaseHelperProcess$", "-test.count=1")
	helper.Env = append(os.Environ(), helperEnv+"=1", helperWorkspaceEnv+"="+workspace,
		helperLeaseDirEnv+"="+leaseDir, helperAgentEnv+"="+agent, helperSandboxEnv+"=1")
	require.NoError(t, helper.Start())
	helperDone := make(chan error, 1)
	go func() { helperDone <- helper.Wait() }()
	t.Cleanup(func() { _ = helper.Process.Kill() })

	var lease Lease
	require.Eventually(t, func() bool {
		files := leaseFiles(t, leaseDir)
		if len(files) == 0 {
			return false
		}
		data, err := os.ReadFile(files[0])
		if err != nil || json.Unmarshal(data, &lease) != nil {
			return false
		}
		// bwrap, the namespace's init, sh and sleep.
		return len(liveGroupMembers(t, lease.PGID)) >= 4
	}, 30*time.Second, 10*time.Millisecond, "the helper's agent never started")
	killGroupAtCleanup(t, lease.PGID)

	require.NoError(t, helper.Process.Signal(syscall.SIGKILL)) // the host crashes
	require.Error(t, <-helperDone)
	assertGroupGone(t, lease.PGID)
}
