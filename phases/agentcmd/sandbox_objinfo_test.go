package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// What an agent writes into its own object directory besides objects
// (its alternates pointed elsewhere, a commit-graph git would not write,
// an info/packs or a pack-directory file not git's) is contained, its copy
// thrown away, and reported; what git itself writes there for a
// cooperative agent (a commit, git gc --auto, a repack, a commit-graph, a
// multi-pack-index, git maintenance's tasks) is not.
func TestWritesIntoTheAgentsObjectDirectoryAreReportedButNotGitsOwn(t *testing.T) {
	requireSandbox(t)
	const objects = `o="$(git rev-parse --git-common-dir)/objects"` + "\n"
	const commit = "echo work > work.txt && git add work.txt && git commit -qm work\n"
	elsewhere := visibleTempDir(t)
	tests := []struct {
		name, script string
		notes        []string // regular expressions, in order
	}{
		{"commits and runs git gc --auto", "set -e\n" + commit + "git gc --auto\n", nil},
		{"commits, repacks, writes a commit-graph and a multi-pack-index", "set -e\n" + commit + `git repack -q -a -d
git commit-graph write --reachable
git multi-pack-index write
echo more > more.txt && git add more.txt && git commit -qm more
git maintenance run --task=commit-graph --task=loose-objects --task=incremental-repack
`, nil},
		{"points its alternates elsewhere", "set -e\n" + objects + `echo ` + elsewhere + ` > "$o/info/alternates"`,
			[]string{`^agentcmd: sandbox: the agent rewrote its object directory's alternates \(now "` + regexp.QuoteMeta(elsewhere) +
				`"\), which git never does: its own copy's, nothing real changed$`}},
		{"removes its alternates", objects + `rm "$o/info/alternates"`,
			[]string{`^agentcmd: sandbox: the agent removed its object directory's alternates, which git never does: its own copy's, nothing real changed$`}},
		{"makes its alternates a link", objects + `rm "$o/info/alternates" && ln -s /dev/zero "$o/info/alternates"`,
			[]string{`^agentcmd: sandbox: the agent made its object directory's alternates no file but L---------, which git never does`}},
		{"leaves a commit-graph git does not verify", "set -e\n" + commit + objects + `git commit-graph write --reachable
rm -f "$o/info/commit-graph" && printf 'junk' > "$o/info/commit-graph"
`, []string{`^agentcmd: sandbox: the agent left a commit-graph in its object directory that git does not verify \(git commit-graph verify: exit status 1: .*commit-graph file is too small.*\): its own copy's, nothing real changed$`}},
		{"writes info and pack files git does not", objects + `printf 'P ../../evil.pack\n' > "$o/info/packs"
echo http://evil.invalid/ > "$o/info/http-alternates"
mkdir -p "$o/pack" && echo x > "$o/pack/evil" && mkdir "$o/nested"`,
			[]string{`^agentcmd: sandbox: wrote "info/http-alternates", "info/packs \(the line \\"P ../../evil.pack\\"\)", "nested", and 1 more into its object directory \(` +
				regexp.QuoteMeta(filepath.Join("REPO", ".git", "objects")) + `\), which git does not write there: its own copy's, nothing real changed$`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTeamLayout(t)
			agent := writeScript(t, t.TempDir(), "agent", tt.script+"\n")
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, "%s\n%s", res.Stderr, res.Output)
			got := rec.lines(phases.StreamSandbox)
			require.Len(t, got, len(tt.notes), "%q", got)
			for i, n := range tt.notes {
				assert.Regexp(t, regexp.MustCompile(regexp.MustCompile(`REPO`).ReplaceAllLiteralString(n, regexp.QuoteMeta(l.repo))), got[i])
			}
			gitOut(t, l.repo, "fsck", "--no-progress", "--strict", "--no-reflogs")
			_, err = os.Stat(filepath.Join(l.repo, ".git", "objects", "info", "alternates"))
			assert.ErrorIs(t, err, os.ErrNotExist, "the real store borrows nothing")
		})
	}
}
