package agentcmd

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
)

// verifyOne runs one check through a Verifier contained by d in ws.
func verifyOne(t *testing.T, d *Driver, ws string, check phases.GateCheck) phases.CheckResult {
	t.Helper()
	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: d})
	rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: ws},
		phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{check}}}}, phases.VerifyOptions{})
	require.NoError(t, err)
	require.Len(t, rep.Levels, 1)
	require.Len(t, rep.Levels[0].Checks, 1)
	return rep.Levels[0].Checks[0]
}

// A gate check runs the code under verification, which the agent wrote: a
// hostile one tries from the story's worktree what a hostile agent tries.
// Contained, it has the agent's rights and no more; what it wrote outside
// is reported, and nothing it did to git is carried back, not even a
// commit on its own branch.
func TestAGateCheckHasTheAgentsRightsAndNoMore(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	hostHome := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(hostHome, "credentials"), []byte("hunter2"), 0o600))
	t.Setenv("HOME", hostHome)
	t.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	t.Setenv("DATABASE_URL", "postgres://u:dbpassword@127.0.0.1/x")
	t.Setenv("ANTHROPIC_API_KEY", "the-agents-key")
	t.Setenv("UNLISTED_TOKEN", "unlisted-secret")
	mainBefore, aBefore, bBefore := l.ref(t, "main"), l.ref(t, "foreman/A"), l.ref(t, "foreman/B")

	writeScript(t, l.wtA, "check.sh", `
try() { name=$1; shift; if ( "$@" ) >/dev/null 2>&1; then echo "$name ok"; else echo "$name refused"; fi; }
try write-main-checkout sh -c 'echo evil > "$REPO/README"'
try write-other-worktree sh -c 'echo evil > "$REPO/.worktrees/B/EVIL"'
try read-state-db grep -qx state "$REPO/.foreman/foreman.db"
try write-state-db sh -c 'echo evil > "$REPO/.foreman/foreman.db"'
try read-host-home cat "$HOSTHOME/credentials"
try write-host-home sh -c 'echo evil > "$HOSTHOME/planted"'
env | grep -q -e webhook-secret -e dbpassword -e unlisted-secret -e the-agents-key && echo "env leaked" || echo "env clean"
[ "$HOME" != "$HOSTHOME" ] && touch "$HOME/.check-cache" && echo "home own"
[ "$GIVEN" = yes ] && echo "given env"
try git-status git status --porcelain
echo built > build.out && echo "workspace writable"
try commit sh -c 'git add build.out && git -c user.name=c -c user.email=c@x commit -q -m "the check commits"'
try update-ref-main git update-ref refs/heads/main HEAD
try move-other-branch git update-ref refs/heads/foreman/B HEAD
exit 3
`)
	d := New(Config{Argv: []string{"true"}, LeaseDir: l.leases, Sandbox: Sandbox{Mode: SandboxRequired, Hide: []string{l.stateDir, l.repo}}})
	res := verifyOne(t, d, l.wtA, phases.GateCheck{Name: "hostile", Argv: []string{"./check.sh"},
		Env: []string{"REPO=" + l.repo, "HOSTHOME=" + hostHome, "GIVEN=yes"}})

	assert.False(t, res.Passed)
	assert.Equal(t, 3, res.ExitCode, "the check's own exit status: %s", res.Output)
	for _, attempt := range []string{"write-other-worktree", "read-state-db", "read-host-home"} {
		assert.Contains(t, res.Output, attempt+" refused")
	}
	for _, line := range []string{"write-main-checkout ok", "env clean", "home own", "given env", "git-status ok", "workspace writable", "commit ok",
		"update-ref-main ok", "move-other-branch ok"} {
		assert.Contains(t, res.Output, line)
	}
	for _, note := range []string{
		"refused the check's move of refs/heads/main (another branch): not carried back",
		"refused the check's move of refs/heads/foreman/B (another branch): not carried back",
		"refused the check's move of refs/heads/foreman/A, the branch under verification: not carried back",
		fmt.Sprintf("wrote %q into the hidden %s (%s): a decoy, nothing real changed", "README", "directory", l.repo),
		fmt.Sprintf("wrote %q into the hidden %s (%s): a decoy, nothing real changed", "foreman.db", "directory", l.stateDir),
		fmt.Sprintf("wrote %q into the hidden %s (%s): a decoy, nothing real changed", "planted", "host's home", hostHome),
	} {
		assert.Contains(t, res.Refused, note)
	}

	// Nothing real changed but the workspace, which is the check's to write.
	assert.Equal(t, mainBefore, l.ref(t, "main"))
	assert.Equal(t, aBefore, l.ref(t, "foreman/A"), "not even its own branch: a check adds nothing to the work")
	assert.Equal(t, bBefore, l.ref(t, "foreman/B"))
	readme, err := os.ReadFile(filepath.Join(l.repo, "README"))
	require.NoError(t, err)
	assert.Equal(t, "hello\n", string(readme))
	db, err := os.ReadFile(filepath.Join(l.stateDir, "foreman.db"))
	require.NoError(t, err)
	assert.Equal(t, "state", string(db))
	assert.NoFileExists(t, filepath.Join(hostHome, "planted"))
	assert.NoFileExists(t, filepath.Join(l.wtB, "EVIL"))
	assert.FileExists(t, filepath.Join(l.wtA, "build.out"))

	// Its home is kept for the workspace (a build cache survives), apart
	// from the agents' home; RemoveHome removes both.
	key, _, err := leaseKey(l.wtA)
	require.NoError(t, err)
	gateHome := filepath.Join(l.leases, "homes", key+gateHomeSuffix)
	assert.FileExists(t, filepath.Join(gateHome, ".check-cache"))
	require.NoError(t, d.RemoveHome(context.Background(), l.wtA))
	assert.NoDirExists(t, gateHome)
}

// A cooperative check, which reads git and writes its workspace and its
// home, is refused nothing.
func TestACooperativeGateCheckIsRefusedNothing(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	check := writeScript(t, l.wtA, "check.sh", `set -e
git status --porcelain
git log -1 --format=%s
git diff --check HEAD
git var GIT_COMMITTER_IDENT
mkdir -p "$HOME/.cache/tool" && echo cached > "$HOME/.cache/tool/entry"
echo out > build.out
cat README
`)
	d := New(Config{Argv: []string{"true"}, LeaseDir: l.leases, Sandbox: Sandbox{Mode: SandboxRequired, Hide: []string{l.stateDir, l.repo},
		Mirror: []string{filepath.Join(l.repo, ".worktrees")}}})
	res := verifyOne(t, d, l.wtA, phases.GateCheck{Name: "cooperative", Argv: []string{check}})
	assert.True(t, res.Passed, res.Output)
	assert.Contains(t, res.Output, "hello")
	assert.Empty(t, res.Refused)
}

// With Sandbox.ChecksOffline a check has only a loopback interface, while
// the driver's agents keep the host's network.
func TestAnOfflineCheckHasOnlyALoopback(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	interfaces := []string{"sh", "-c", "tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '"}
	for _, offline := range []bool{false, true} {
		d := New(Config{Argv: []string{"true"}, LeaseDir: l.leases, Sandbox: Sandbox{Mode: SandboxRequired, ChecksOffline: offline}})
		res := verifyOne(t, d, l.wtA, phases.GateCheck{Name: "net", Argv: interfaces})
		require.True(t, res.Passed, res.Output)
		if offline {
			assert.Equal(t, "lo ", res.Output)
		} else {
			assert.NotEqual(t, "lo ", res.Output, "the host's interfaces: %s", res.Output)
		}
	}
}

// Where the driver runs its agents unsandboxed, a check runs on the host,
// but in an environment built as the sandbox's is: no secret, no agent's
// API key.
func TestAnUnsandboxedGateCheckGetsABuiltEnvironment(t *testing.T) {
	t.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	t.Setenv("ANTHROPIC_API_KEY", "the-agents-key")
	t.Setenv("GOFLAGS", "-count=1")
	d := New(Config{Argv: []string{"true"}, Sandbox: Sandbox{Mode: SandboxOff}})
	res := verifyOne(t, d, t.TempDir(), phases.GateCheck{Name: "env", Argv: []string{"env"}, Env: []string{"GIVEN=yes"}})
	require.True(t, res.Passed, res.Output)
	assert.NotContains(t, res.Output, "webhook-secret")
	assert.NotContains(t, res.Output, "the-agents-key")
	assert.Contains(t, res.Output, "GOFLAGS=-count=1")
	assert.Contains(t, res.Output, "GIVEN=yes")
	assert.Contains(t, res.Output, "HOME="+os.Getenv("HOME"))
	assert.Empty(t, res.Refused)
}

// A sandbox required where none is available fails Verify at once: the
// check does not run on the host instead.
func TestARequiredSandboxThatIsMissingRunsNoCheck(t *testing.T) {
	d := New(Config{Argv: []string{"true"}, Sandbox: Sandbox{Mode: SandboxRequired, Bwrap: "/nonexistent/bwrap"}})
	ws := t.TempDir()
	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: d})
	_, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: ws},
		phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "touch", Argv: []string{"touch", filepath.Join(ws, "ran")}}}}}}, phases.VerifyOptions{})
	require.ErrorIs(t, err, gates.ErrNotContained)
	require.ErrorIs(t, err, ErrNoSandbox)
	assert.NoFileExists(t, filepath.Join(ws, "ran"))
}

// BenchmarkGateCheckContained runs the same gate check (sh -c 'git status
// && ls') in a story's worktree on the host and in the agent's sandbox
// (with the team's lease directory, so with decoys), alternately in one
// run: the difference is what containing a check costs. Go's build cache
// per story is the other cost, measured on the quickstart (docs).
func BenchmarkGateCheckContained(b *testing.B) {
	if !New(Config{Sandbox: Sandbox{Mode: SandboxRequired}}).Sandboxed() {
		b.Skip("no OS sandbox here")
	}
	ws := benchWorktree(b)
	leases := filepath.Join(filepath.Dir(filepath.Dir(ws)), ".foreman", "leases")
	if err := os.MkdirAll(leases, 0o755); err != nil {
		b.Fatal(err)
	}
	check := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
		{Name: "c", Argv: []string{"sh", "-c", "git status --porcelain && ls"}}}}}}
	host := gates.NewVerifier(gates.VerifierConfig{})
	contained := gates.NewVerifier(gates.VerifierConfig{Sandbox: New(Config{Argv: []string{"true"}, LeaseDir: leases,
		Sandbox: Sandbox{Mode: SandboxRequired}})})
	run := func(v *gates.Verifier) time.Duration {
		start := time.Now()
		rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: ws}, check, phases.VerifyOptions{})
		if err != nil || !rep.Passed {
			b.Fatalf("%v %+v", err, rep)
		}
		return time.Since(start)
	}
	run(contained) // the probe
	var off, on time.Duration
	for b.Loop() {
		off += run(host)
		on += run(contained)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((off / n).Microseconds()), "µs-host/op")
	b.ReportMetric(float64((on / n).Microseconds()), "µs-contained/op")
	b.ReportMetric(float64(on)/float64(off), "ratio")
}
