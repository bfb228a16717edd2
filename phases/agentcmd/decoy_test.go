package agentcmd

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// What an agent writes into a hidden directory lands in a decoy (the
// worktree root's mirrors the other worktrees' names): reported once per
// directory (the mount points bwrap made there are not the
// agent's), bounded, with a directory it made named once, and removed
// with the decoy without following the links it planted.
func TestDecoysReportWhatTheAgentWroteAndAreRemoved(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name, script string
		notes        []string // %[1]s: the main checkout, %[2]s: the state directory
	}{
		{"nothing written", `true`, nil},
		{"main checkout", `echo evil > "$REPO/EVIL" && echo x >> "$REPO/README"`,
			[]string{`wrote "EVIL", "README" into the hidden main checkout (%[1]s): a decoy, nothing real changed`}},
		{"a directory, named once", `mkdir -p "$REPO/.foreman/dir/sub" && touch "$REPO/.foreman/dir/sub/f"`,
			[]string{`wrote "dir/" into the hidden state directory (%[2]s): a decoy, nothing real changed`}},
		{"beside the mount points", `echo x > "$REPO/.foreman/results/planted"; echo y > "$REPO/.worktrees/C";
echo z > "$REPO/.foreman/leases/planted"; echo own > "$REPO/.foreman/results/A-a1/own"; echo w > /run/agent/planted`,
			[]string{`wrote "agent/planted" into the hidden runtime directory (/run): a decoy, nothing real changed`,
				`wrote "planted" into the hidden lease directory (%[2]s/leases): a decoy, nothing real changed`,
				`wrote "results/planted" into the hidden state directory (%[2]s): a decoy, nothing real changed`,
				`wrote "C" into the hidden worktree root (%[1]s/.worktrees): a decoy, nothing real changed`}},
		{"made and removed before it exited", `echo x > "$REPO/tmp" && rm "$REPO/tmp" && mkdir -p "$REPO/.foreman/d/e" && rm -r "$REPO/.foreman/d"`,
			[]string{`wrote "tmp" (removed) into the hidden main checkout (%[1]s): a decoy, nothing real changed`,
				`wrote "d" (removed) into the hidden state directory (%[2]s): a decoy, nothing real changed`}},
		{"the system's hidden places", `echo x > /run/planted; mkdir -p /run/user/0 && touch /run/user/0/bus`,
			[]string{`wrote "planted", "user/" into the hidden runtime directory (/run): a decoy, nothing real changed`}},
		{"another story's worktree by name", `ls "$REPO/.worktrees/B" && echo evil > "$REPO/.worktrees/B/EVIL"`,
			[]string{`opened "B/" in the hidden worktree root (%[1]s/.worktrees): a decoy, nothing real to see`,
				`wrote "B/EVIL" into the hidden worktree root (%[1]s/.worktrees): a decoy, nothing real changed`}},
		{"listed", `ls -a "$REPO" >/dev/null`,
			[]string{`listed the hidden main checkout (%[1]s): a decoy, nothing real to see`}},
		{"removed whole", `rm -rf "$REPO/.foreman" 2>/dev/null || true`,
			[]string{`opened ".aws/", ".docker/", ".gnupg/" and 2 more in the hidden lease directory (%[2]s/leases): a decoy, nothing real to see`,
				`removed ".aws/", ".docker/", ".env" and 10 more from the hidden lease directory (%[2]s/leases): a decoy, nothing real lost`,
				`opened ".aws/", ".docker/", ".gnupg/" and 2 more in the hidden state directory (%[2]s): a decoy, nothing real to see`,
				`removed ".aws/", ".docker/", ".env" and 10 more from the hidden state directory (%[2]s): a decoy, nothing real lost`}},
		{"a canary removed", `rm "$REPO/.netrc"`,
			[]string{`removed ".netrc" from the hidden main checkout (%[1]s): a decoy, nothing real lost`}},
		{"secrets' usual places read", `cat "$REPO/.env" 2>/dev/null || true; cat "$REPO/.git-credentials" "$REPO/.foreman/.netrc"; ls "$REPO/.worktrees/.ssh"; cat "$REPO/.credentials" || true`,
			[]string{`opened ".git-credentials" in the hidden main checkout (%[1]s): a decoy, nothing real to see`,
				`opened ".netrc" in the hidden state directory (%[2]s): a decoy, nothing real to see`,
				`opened ".ssh/" in the hidden worktree root (%[1]s/.worktrees): a decoy, nothing real to see`}},
		{"many", `for i in $(seq 1 20); do : > "$REPO/f$i"; done`,
			[]string{`wrote "f1", "f10", "f11" and 17 more into the hidden main checkout (%[1]s): a decoy, nothing real changed`}},
		{"beyond the bound", `for i in $(seq 1 1100); do : > "$REPO/f$i"; done`,
			[]string{`wrote "f1", "f10", "f100" and more into the hidden main checkout (%[1]s): a decoy, nothing real changed`}},
		{"links and locked directories", `ln -s "$REPO/README" "$REPO/link" && ln -s "$REPO/README" "$REPO/.foreman/link" &&
mkdir "$REPO/.foreman/locked" && touch "$REPO/.foreman/locked/f" && chmod 000 "$REPO/.foreman/locked"`,
			[]string{`wrote "link" into the hidden main checkout (%[1]s): a decoy, nothing real changed`,
				`wrote "link", "locked/" into the hidden state directory (%[2]s): a decoy, nothing real changed`}},
	}
	// A listing or a canary read (anything opened) is seen only with the
	// open watch (root's fanotify).
	listings := newOpenWatch()
	listings.stop()
	listing := regexp.MustCompile(`^agentcmd: sandbox: (listed|opened) `)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTeamLayout(t)
			own := filepath.Join(l.results, "A-a1")
			require.NoError(t, os.Mkdir(own, 0o700))
			agent := writeScript(t, t.TempDir(), "agent", "set -e\n"+tt.script+"\n")
			d := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: []string{"REPO=" + l.repo},
				Sandbox: Sandbox{Mode: SandboxRequired}}).
				WithHideNamed(l.repo, "main checkout").
				WithHideNamed(l.stateDir, "state directory").
				WithHideNamed(filepath.Join(l.repo, ".worktrees"), "worktree root").
				WithMirror(filepath.Join(l.repo, ".worktrees"))
			rec := &recorder{}
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA, Writable: []string{own}}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)

			var want []string
			for _, n := range tt.notes {
				if strings.Contains(n, "%[") {
					n = fmt.Sprintf(n, l.repo, l.stateDir)
				}
				if n = "agentcmd: sandbox: " + n; listings != nil || !listing.MatchString(n) {
					want = append(want, n)
				}
			}
			assert.Equal(t, want, rec.lines(phases.StreamSandbox))

			assert.Equal(t, "hello\n", readFile(t, l.repo, "README"), "the real file")
			assert.NoFileExists(t, filepath.Join(l.repo, "EVIL"))
			assert.NoFileExists(t, filepath.Join(l.wtB, "EVIL"), "the real worktree behind the mirrored name")
			assert.NoFileExists(t, filepath.Join(l.results, "planted"))
			assert.Equal(t, "state", readFile(t, l.stateDir, "foreman.db"))
			entries, err := os.ReadDir(filepath.Join(l.leases, decoyDirName))
			require.NoError(t, err)
			assert.Empty(t, entries, "the decoys are removed")
		})
	}
}

// Without a LeaseDir there is nowhere to keep decoys out of every agent's
// sight: the hidden directories are empty and read-only, as before.
func TestWithoutALeaseDirHiddenDirectoriesAreReadOnly(t *testing.T) {
	requireSandbox(t)
	l := newTeamLayout(t)
	agent := writeScript(t, t.TempDir(), "agent", `echo evil > "$REPO/EVIL" && echo written`)
	rec := &recorder{}
	res, err := New(Config{Argv: []string{agent}, Env: []string{"REPO=" + l.repo}, Sandbox: Sandbox{Mode: SandboxRequired}}).
		WithHideNamed(l.repo, "main checkout").
		Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
	require.NoError(t, err)
	assert.False(t, res.Success)
	assert.NotContains(t, rec.lines(phases.StreamText), "written")
	assert.Empty(t, rec.lines(phases.StreamSandbox))
	assert.NoFileExists(t, filepath.Join(l.repo, "EVIL"))
}

// While the agent runs, the host's own walk of the state directory (a
// backup, a cleaner, the driver) opens every directory of the decoys and
// reads their canaries: with the driver's open watch (fanotify, which
// root has) none of that is the agent's; the agent's own listing and read
// are. Without it (an ordinary user) nothing opened is counted at all:
// it could be the host's.
func TestTheHostsOwnWalkOfTheDecoysIsNotTheAgents(t *testing.T) {
	requireSandbox(t)
	attributed := newOpenWatch()
	attributed.stop()
	if os.Geteuid() == 0 {
		require.NotNil(t, attributed, "root has fanotify")
	}
	l := newTeamLayout(t)
	ctl := t.TempDir()
	for _, fifo := range []string{"started", "walked"} {
		require.NoError(t, syscall.Mkfifo(filepath.Join(ctl, fifo), 0o644))
	}
	agent := writeScript(t, t.TempDir(), "agent", `set -e
echo started > "$CTL/started"
read x < "$CTL/walked"
ls "$REPO/.foreman" > /dev/null
cat "$REPO/.foreman/.pgpass"
`)
	done := make(chan struct{})
	var res phases.AgentResult
	var err error
	rec := &recorder{}
	go func() {
		defer close(done)
		res, err = New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: []string{"REPO=" + l.repo, "CTL=" + ctl},
			Sandbox: Sandbox{Mode: SandboxRequired}}).
			WithHideNamed(l.repo, "main checkout").
			WithHideNamed(l.stateDir, "state directory").
			Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA, Writable: []string{ctl}}, rec.callback)
	}()
	started, err2 := os.ReadFile(filepath.Join(ctl, "started"))
	require.NoError(t, err2)
	require.Equal(t, "started\n", string(started))
	opened := 0
	require.NoError(t, filepath.WalkDir(l.stateDir, func(p string, e fs.DirEntry, err error) error {
		if err == nil && e.Type().IsRegular() && strings.Contains(p, decoyDirName) && filepath.Base(p) == ".env" {
			_, err = os.ReadFile(p)
			opened++
		}
		return err
	}))
	require.NotZero(t, opened, "the walk went through the decoys")
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "walked"), []byte("go\n"), 0o644))
	<-done
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)

	notes := rec.lines(phases.StreamSandbox)
	pgpass := `agentcmd: sandbox: opened ".pgpass" in the hidden state directory (` + l.stateDir + `): a decoy, nothing real to see`
	if attributed == nil {
		assert.Empty(t, notes)
		return
	}
	assert.Equal(t, []string{pgpass}, notes, "the agent's read (its listing is said only where it read nothing); not the host's walk and reads")
}
