package agentcmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
)

// The object store is the repository's, shared by every story and the
// host: an agent writes its own objects (borrowing the real store
// read-only) and the driver carries back only those that are what their
// names say. An agent deleting the objects it sees loses nothing real; a
// forged object stays out; what it committed, staged or packed lands.
func TestTheAgentsObjectsAreCheckedBeforeTheyReachTheRealStore(t *testing.T) {
	requireSandbox(t)
	const forge = `o="$(git rev-parse --git-common-dir)/objects"
evil=$(printf 'evil\n' | git hash-object -w --stdin)
real=$(printf 'the real content\n' | git hash-object --stdin)
mkdir -p "$o/$(echo $real | cut -c1-2)"
cp "$o/$(echo $evil | cut -c1-2)/$(echo $evil | cut -c3-)" "$o/$(echo $real | cut -c1-2)/$(echo $real | cut -c3-)"
printf 'no object' > "$o/$(echo $evil | cut -c1-2)/$(echo $real | cut -c3-)"
`
	tests := []struct {
		name, script string
		moves        bool // its branch
		notes        []string
	}{
		{"deletes every object it sees", `find "$(git rev-parse --git-common-dir)/objects" "$(git rev-parse --git-common-dir)/.foreman-host/objects" -type f -delete 2>/dev/null; true`,
			false, []string{alternatesRemoved}},
		{"commits, then deletes its own objects", `set -e
echo work > work.txt && git add work.txt && git commit -qm work
find "$(git rev-parse --git-common-dir)/objects" -type f -delete`,
			false, []string{alternatesRemoved, `refused the agent's refs/heads/foreman/A: its commit %[4]s is not in the repository (the objects the agent wrote were deleted or refused)`}},
		{"forges objects", "set -e\n" + forge + "echo work > work.txt && git add work.txt && git commit -qm work", true, []string{
			`refused the agent's object %[1]s: its content is object %[2]s, not the one its name says`,
			`refused the agent's object %[3]s: not a compressed object: zlib: invalid header`}},
		{"commits, stages and packs", `set -e
echo one > one.txt && git add one.txt && git commit -qm one
git repack -q -a -d
echo two > two.txt && git add two.txt && git commit -qm two
echo staged > staged.txt && git add staged.txt`, true, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTeamLayout(t)
			mainBefore, branchBefore := l.ref(t, "main"), l.ref(t, "foreman/A")
			agent := writeScript(t, t.TempDir(), "agent", tt.script+"\n")
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)

			realID := hashBlob(t, l.repo, "the real content\n")
			evilID := hashBlob(t, l.repo, "evil\n")
			got := rec.lines(phases.StreamSandbox)
			require.Len(t, got, len(tt.notes), "%q", got)
			for i, n := range tt.notes {
				// %[4]s: the agent's own commit, whose name the test does not know.
				if strings.Contains(n, "%") {
					n = fmt.Sprintf(n, realID, evilID, evilID[:2]+realID[2:], "COMMIT")
				}
				want := regexp.QuoteMeta("agentcmd: sandbox: " + n)
				assert.Regexp(t, "^"+strings.ReplaceAll(want, "COMMIT", "[0-9a-f]{40}")+"$", got[i])
			}

			// (Not its reflogs: the worktree's own HEAD log, in its admin
			// directory, which is the agent's, may name its commit that
			// was never carried back.)
			gitOut(t, l.repo, "fsck", "--no-progress", "--strict", "--no-reflogs")
			assert.Equal(t, mainBefore, l.ref(t, "main"))
			if tt.moves {
				assert.NotEqual(t, branchBefore, l.ref(t, "foreman/A"), "its commits carried back, their objects with them")
				assert.Empty(t, gitOut(t, l.wtA, "status", "--porcelain", "--untracked-files=no", "--", "work.txt", "one.txt", "two.txt"))
			} else {
				assert.Equal(t, branchBefore, l.ref(t, "foreman/A"))
			}
			assert.Error(t, gitErr(l.repo, "cat-file", "-e", realID), "the forged object stays out")
			if strings.Contains(tt.script, "staged.txt") {
				assert.Equal(t, "A  staged.txt", gitOut(t, l.wtA, "status", "--porcelain", "--untracked-files=no"), "what it staged is there")
				gitOut(t, l.wtA, "diff", "--cached")
			}
			leftovers, err := filepath.Glob(filepath.Join(l.repo, ".git", "objects", "*", "tmp_obj_foreman_*"))
			require.NoError(t, err)
			assert.Empty(t, leftovers)
			_, err = os.Stat(filepath.Join(l.repo, ".git", "objects", "info", "alternates"))
			assert.ErrorIs(t, err, os.ErrNotExist, "the real store borrows nothing")
		})
	}
}

// alternatesRemoved is the note about an agent that removed its object
// directory's info/alternates (with every other file there).
const alternatesRemoved = "the agent removed its object directory's alternates, which git never does: its own copy's, nothing real changed"

// hashBlob is the name of a blob holding content.
func hashBlob(t *testing.T, repo, content string) string {
	t.Helper()
	cmd := exec.Command("git", "hash-object", "--stdin")
	cmd.Dir, cmd.Stdin = repo, strings.NewReader(content)
	out, err := cmd.Output()
	require.NoError(t, err)
	return strings.TrimSpace(string(out))
}

// gitErr runs git in dir and returns its error.
func gitErr(dir string, args ...string) error {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), testrepo.GitEnv()...)
	return cmd.Run()
}
