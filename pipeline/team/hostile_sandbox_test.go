package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// snoopAgent plays every stage; in the build stage of a story with
// <id>.snoop in the control directory it lists the worktree root, reads
// the main checkout's .env and moves HONEST's branch, saving what it got
// in the control directory, then does its work.
const snoopAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
*) echo ok > "$id.txt" && git add -A && git commit -qm "$id: ok"
   head -c 100000 /dev/zero > "$HOME/saved-output"
   if [ -e "$ctl/$id.snoop" ]; then
     repo=$(cat "$ctl/repo")
     ls -a "$repo/.worktrees" "$repo/.worktrees/HONEST" > "$ctl/$id.worktrees" 2>&1 || true
     cat "$repo/.env" "$repo/.git-credentials" > "$ctl/$id.env" 2>&1 || true
     git update-ref refs/heads/foreman/HONEST HEAD
   fi
   report complete ',"summary":"wrote the file"' ;;
esac
`

// snoopReviewer approves, and detaches SNOOP's HEAD on the way.
const snoopReviewer = `#!/bin/sh
[ "$FOREMAN_ITEM" = SNOOP ] && git checkout -q --detach HEAD
printf '{"assignment":"%s","outcome":"approve"}' "$FOREMAN_ASSIGNMENT" > "$FOREMAN_RESULT"
`

// A sandboxed agent in a repository outside /tmp and the host's home sees
// neither the other stories' worktrees nor the main checkout's ignored
// files, and its move of another story's branch is dropped and counted as
// a refusal, as is its reviewer's detached HEAD, put back; both stories
// land, and their agents' homes go with their worktrees.
func TestASandboxedAgentSeesNoOtherStoryAndItsRefMovesAreCounted(t *testing.T) {
	t.Parallel()
	requireSandbox(t)
	ctx := context.Background()
	repo := filepath.Join(hostileBase(t), "repo")
	ctl := t.TempDir()
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	require.NoError(t, os.WriteFile(filepath.Join(repo, ".env"), []byte("API_TOKEN="+envSecret+"\n"), 0o600))
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "repo"), []byte(repo), 0o644))
	require.NoError(t, os.WriteFile(filepath.Join(ctl, "SNOOP.snoop"), nil, 0o644))
	script, err := demo.WriteScript(t.TempDir(), "snoop.sh", strings.ReplaceAll(snoopAgent, "%CTL%", demo.ShellQuote(ctl)))
	require.NoError(t, err)
	reviewer, err := demo.WriteScript(t.TempDir(), "reviewer.sh", snoopReviewer)
	require.NoError(t, err)
	sandbox := agentcmd.Sandbox{Mode: agentcmd.SandboxRequired, Binds: []agentcmd.Bind{{Source: ctl, Writable: true}}}
	tm, err := team.New(ctx, team.Config{
		LandRefused: true, // what is refused and counted is the point here, not the pause before landing
		Repo:        repo,
		Agent:       agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: sandbox}),
		Reviewer:    agentcmd.New(agentcmd.Config{Argv: []string{reviewer}, Env: demo.GitEnv(), Sandbox: sandbox}),
		Gates:       gatePlan(),
		Merge:       merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "HONEST", Title: "honest"}))
	require.NoError(t, tm.Add(ctx, team.Story{ID: "SNOOP", Title: "snoops"}))

	res := run(t, tm)

	assert.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"HONEST", "SNOOP"}, trailers(t, repo))
	listing, err := os.ReadFile(filepath.Join(ctl, "SNOOP.worktrees"))
	require.NoError(t, err)
	assert.NotContains(t, string(listing), "HONEST.txt", "the other story's worktree is hidden (its name is mirrored, empty)")
	env, err := os.ReadFile(filepath.Join(ctl, "SNOOP.env"))
	require.NoError(t, err)
	assert.NotContains(t, string(env), envSecret, "the main checkout is hidden")
	var refused []string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventRefused {
			assert.Equal(t, "SNOOP", string(e.Story))
			refused = append(refused, e.Detail)
		}
	}
	// Its listing of the worktree root and its read of .git-credentials
	// are told from the host's own where the driver runs as root
	// (fanotify), and not counted elsewhere.
	opens := os.Geteuid() == 0
	if opens {
		require.Len(t, refused, 4, "the builder's ref move, its listing of the worktree root and its read of .git-credentials, the reviewer's HEAD")
		// (HONEST's worktree, if there by then, is a name the decoy mirrors.)
		assert.Regexp(t, `^the OS sandbox: (listed the hidden|opened "HONEST/" in the hidden) worktree root \(`+
			regexp.QuoteMeta(filepath.Join(repo, ".worktrees"))+`\): a decoy, nothing real to see$`, refused[1])
		assert.Equal(t, `the OS sandbox: opened ".git-credentials" in the hidden main checkout (`+repo+"): a decoy, nothing real to see", refused[2])
		refused = slices.Delete(refused, 1, 3)
	}
	require.Len(t, refused, 2, "the builder's ref move, the reviewer's HEAD")
	assert.Contains(t, refused[0], "the OS sandbox: refused the agent's")
	assert.Contains(t, refused[0], "refs/heads/foreman/HONEST")
	assert.Contains(t, refused[1], "the OS sandbox: the agent moved HEAD")
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	want := int64(2)
	if opens {
		want = 4
	}
	assert.Equal(t, want, st.Refused)

	// The agents' homes went with the merged stories' worktrees.
	for _, dir := range []string{"leases", filepath.Join("review", "leases")} {
		homes, err := filepath.Glob(filepath.Join(repo, team.StateDirName, dir, "homes", "*"))
		require.NoError(t, err)
		assert.Empty(t, homes, dir)
	}
}

// writerAgent plays every stage; in WRITER's build it writes into each
// place its sandbox hides (the main checkout, the team's state directory,
// another story's worktree, the host's home), then does its work.
const writerAgent = `#!/bin/sh
set -eu
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
reviewer) report approve ;;
*) if [ "$FOREMAN_ITEM" = WRITER ]; then
     echo evil > %REPO%/EVIL; echo evil >> %REPO%/go.mod
     : > %REPO%/.foreman/foreman.db
     mkdir -p %REPO%/.worktrees/HONEST && echo evil > %REPO%/.worktrees/HONEST/EVIL
     echo evil > %HOSTHOME%/planted
   fi
   echo ok > "$FOREMAN_ITEM.txt" && git add -A && git commit -qm "$FOREMAN_ITEM: ok"
   report complete ',"summary":"wrote the file"' ;;
esac
`

// Issue 22's "each attempt shows in Status and the events" for writes the
// kernel would refuse: a decoy over each hidden place takes the agent's
// writes, each place written is an EventRefused naming it and counted in
// the story's status, nothing real changes, and both stories land.
func TestWritesIntoHiddenPlacesAreRefusedAndCounted(t *testing.T) {
	ctx := context.Background()
	// What is refused and counted is the point here, not the pause before
	// landing.
	tm, repo, hostHome := writerTeam(t, true)
	goMod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)

	res := run(t, tm)

	assert.Equal(t, 2, res.Merged, res.String())
	assert.ElementsMatch(t, []string{"HONEST", "WRITER"}, trailers(t, repo))
	var refused []string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventRefused {
			assert.Equal(t, "WRITER", string(e.Story))
			refused = append(refused, e.Detail)
		}
	}
	stateDir := filepath.Join(repo, team.StateDirName)
	decoy := "the OS sandbox: wrote %s into the hidden %s (%s): a decoy, nothing real changed"
	// HONEST's worktree, if it is there by then, is a name the worktree
	// root's decoy mirrors: the write is then into that empty directory.
	sibling := fmt.Sprintf(decoy, `"HONEST/"`, "worktree root", filepath.Join(repo, ".worktrees"))
	if slices.Contains(refused, fmt.Sprintf(decoy, `"HONEST/EVIL"`, "worktree root", filepath.Join(repo, ".worktrees"))) {
		sibling = fmt.Sprintf(decoy, `"HONEST/EVIL"`, "worktree root", filepath.Join(repo, ".worktrees"))
	}
	assert.ElementsMatch(t, []string{
		fmt.Sprintf(decoy, `"planted"`, "host's home", hostHome),
		fmt.Sprintf(decoy, `"foreman.db"`, "state directory", stateDir),
		sibling,
		fmt.Sprintf(decoy, `"EVIL", "go.mod"`, "main checkout", repo),
	}, refused)
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.Refused)
	for _, s := range st.Stories {
		if s.ID == "WRITER" {
			assert.Equal(t, int64(4), s.Refused)
			// Four places, four kinds of attempt: each one shown.
			var kinds []string
			for _, k := range s.RefusedKinds {
				assert.Equal(t, int64(1), k.Count, k.Detail)
				assert.False(t, k.First.IsZero() || k.Last.Before(k.First), "%+v", k)
				kinds = append(kinds, k.Detail)
			}
			assert.ElementsMatch(t, refused, kinds)
		}
	}
	assert.Contains(t, st.Text(), "  WRITER: 4, of these kinds")

	// Nothing real changed: the files, the host's home, the team's state.
	assert.NoFileExists(t, filepath.Join(repo, "EVIL"))
	after, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, string(goMod), string(after))
	assert.NoFileExists(t, filepath.Join(hostHome, "planted"))
	assert.NoFileExists(t, filepath.Join(repo, ".worktrees", "HONEST", "EVIL"))
	decoys, err := filepath.Glob(filepath.Join(stateDir, "leases", "decoys", "*"))
	require.NoError(t, err)
	assert.Empty(t, decoys, "the decoys are removed")
	rs, err := team.ReadStatus(ctx, team.Config{Repo: repo})
	require.NoError(t, err, "the database is intact")
	assert.Len(t, rs.Stories, 2)
	for i := range rs.Stories {
		assert.Equal(t, st.Stories[i].RefusedKinds, rs.Stories[i].RefusedKinds, "ReadStatus shows the kinds too")
	}
}

// writerTeam is a team of two sandboxed stories, HONEST and WRITER (whose
// build writes into every hidden place: writerAgent), in a Go module
// repository under hostileBase, the host's $HOME a temporary directory
// (so its caller is not parallel); landRefused is Config.LandRefused.
func writerTeam(t *testing.T, landRefused bool) (tm *team.Team, repo, hostHome string) {
	t.Helper()
	requireSandbox(t)
	ctx := context.Background()
	hostHome = t.TempDir()
	t.Setenv("HOME", hostHome) // the sandbox hides the host's $HOME
	repo = filepath.Join(hostileBase(t), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	body := strings.NewReplacer("%REPO%", demo.ShellQuote(repo), "%HOSTHOME%", demo.ShellQuote(hostHome)).Replace(writerAgent)
	script, err := demo.WriteScript(t.TempDir(), "writer.sh", body)
	require.NoError(t, err)
	tm, err = team.New(ctx, team.Config{
		LandRefused: landRefused,
		Repo:        repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(),
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}),
		Gates: gatePlan(),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "HONEST", Title: "honest"},
		team.Story{ID: "WRITER", Title: "writes where it cannot see"}))
	return tm, repo, hostHome
}
