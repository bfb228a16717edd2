package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// hostileAgent plays every stage like scriptedAgent, and in the build
// stage, after writing and committing <story>.txt, attacks the team's
// state as a control file says:
//
//	<id>.commit-state      commits a file named .foreman
//	<id>.commit-worktrees  commits .worktrees/x (forced past the ignore rule)
//	<id>.commit-sibling    commits a file in the place of another story's
//	                       worktree, .worktrees/<the story in <id>.commit-sibling>
//	<id>.leave-state       leaves a file named .foreman uncommitted, for the
//	                       team's own git add -A to commit
const hostileAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
report() {
  printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"
}
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
*) echo ok > "$id.txt"
   git add -A && { git diff --cached --quiet || git commit -qm "$id: ok"; }
   if [ -e "$ctl/$id.commit-state" ]; then
     echo evil > .foreman && git add .foreman && git commit -qm "$id: a file named .foreman"
   fi
   if [ -e "$ctl/$id.commit-worktrees" ]; then
     mkdir -p .worktrees && echo evil > .worktrees/x && git add -f .worktrees/x && git commit -qm "$id: .worktrees/x"
   fi
   if [ -e "$ctl/$id.commit-sibling" ]; then
     other=$(cat "$ctl/$id.commit-sibling")
     mkdir -p .worktrees && echo evil > ".worktrees/$other" && git add -f ".worktrees/$other" && git commit -qm "$id: .worktrees/$other"
   fi
   if [ -e "$ctl/$id.leave-state" ]; then echo evil > .foreman; fi
   report complete ',"summary":"wrote the file"'
   ;;
esac
`

func newHostileFixture(t *testing.T) *fixture {
	t.Helper()
	f := newFixture(t)
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "hostile.sh",
		strings.ReplaceAll(hostileAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
	return f
}

func TestAStoryCommittingTheTeamsStatePausesAndTheOthersLand(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newHostileFixture(t)
	f.cfg.Workers = 2
	f.touch(t, "EVIL-1.commit-state")
	f.touch(t, "EVIL-2.commit-worktrees")
	f.touch(t, "EVIL-3.leave-state")
	// EVIL-4 lands its file in the place of EVIL-1's worktree, which stays
	// (EVIL-1 pauses) with the agent's work in it.
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, "EVIL-4.commit-sibling"), []byte("EVIL-1"), 0o644))
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx,
		team.Story{ID: "EVIL-1", Title: "commits .foreman"},
		team.Story{ID: "EVIL-2", Title: "commits .worktrees/x"},
		team.Story{ID: "EVIL-3", Title: "leaves .foreman uncommitted"},
		team.Story{ID: "EVIL-4", Title: "commits over another worktree", After: []foreman.ItemID{"EVIL-1"}},
		team.Story{ID: "US-001", Title: "honest"},
		team.Story{ID: "US-002", Title: "honest too", After: []foreman.ItemID{"US-001"}},
	))
	res := run(t, tm)
	assert.Equal(t, 2, res.Merged, res.String())
	assert.Equal(t, 3, res.Paused, res.String())
	assert.ElementsMatch(t, []string{"US-001", "US-002"}, trailers(t, f.repo), "only the honest stories landed")

	want := map[foreman.ItemID]string{
		"EVIL-1": "its branch adds .foreman",
		"EVIL-2": "its branch adds .worktrees/x",
		"EVIL-3": "its uncommitted changes add .foreman",
	}
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	for id, cause := range want {
		s := stateOf(res, id)
		assert.Equal(t, team.StoryPaused, s.State, id)
		require.NotNil(t, s.Pause, id)
		assert.Contains(t, s.Pause.Message, "refused to merge "+string(id)+": "+cause)
		assert.Contains(t, st.Text(), cause, "the status says why %s waits", id)
	}
	paused := map[foreman.ItemID]string{}
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStoryPaused && e.Escalation != nil {
			paused[e.Story] = e.Escalation.Message
		}
	}
	for id, cause := range want {
		assert.Contains(t, paused[id], cause, "the events say why %s paused", id)
	}
	assert.Equal(t, team.StoryBlocked, stateOf(res, "EVIL-4").State, "EVIL-4 waits for EVIL-1")

	// The team's state is intact: main's checkout never had them, the
	// database opens (here and from another process), the paused stories'
	// worktrees hold their agents' work.
	for _, p := range []string{".foreman", ".worktrees", ".worktrees/x"} {
		fi, err := os.Lstat(filepath.Join(f.repo, p))
		if p == ".worktrees/x" {
			assert.ErrorIs(t, err, os.ErrNotExist)
			continue
		}
		require.NoError(t, err, p)
		assert.True(t, fi.IsDir(), p)
	}
	g := gitexec.Runner{Env: demo.IsolatedGitConfig()}
	out, err := g.Run(ctx, f.repo, "ls-tree", "--name-only", "main")
	require.NoError(t, err)
	assert.NotContains(t, out, ".foreman")
	assert.NotContains(t, out, ".worktrees")
	for id := range want {
		assert.FileExists(t, filepath.Join(f.repo, ".worktrees", string(id), string(id)+".txt"))
	}
	assert.FileExists(t, filepath.Join(f.repo, ".worktrees", "EVIL-3", ".foreman"), "the uncommitted file is left where it was")
	status, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err, "the database opens")
	assert.Len(t, status.Stories, 6)

	// EVIL-1 is abandoned by a person; EVIL-4 then runs and tries to land
	// a file where EVIL-1's worktree still is: refused too.
	require.NoError(t, tm.Resolve(ctx, "EVIL-1", team.Skip, "hostile"))
	res = run(t, tm)
	s := stateOf(res, "EVIL-4")
	require.NotNil(t, s.Pause, res.String())
	assert.Contains(t, s.Pause.Message, "its branch adds .worktrees/EVIL-1")
	assert.FileExists(t, filepath.Join(f.repo, ".worktrees", "EVIL-1", "EVIL-1.txt"))
	assert.ElementsMatch(t, []string{"US-001", "US-002"}, trailers(t, f.repo))
}

func TestNewRefusesAnUnsafeStateDirectory(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		prepare func(t *testing.T, f *fixture, elsewhere string)
		field   string
		reason  string
	}{
		{"tracked as a symbolic link", func(t *testing.T, f *fixture, elsewhere string) {
			require.NoError(t, os.Symlink(elsewhere, filepath.Join(f.repo, ".foreman")))
			gitIn(t, f.repo, "add", ".foreman")
			gitIn(t, f.repo, "commit", "-q", "-m", "a link named .foreman")
		}, "StateDir", "is a symbolic link"},
		{"an untracked symbolic link", func(t *testing.T, f *fixture, elsewhere string) {
			require.NoError(t, os.Symlink(elsewhere, filepath.Join(f.repo, ".foreman")))
		}, "StateDir", "is a symbolic link"},
		{"tracked", func(t *testing.T, f *fixture, _ string) {
			require.NoError(t, os.MkdirAll(filepath.Join(f.repo, ".foreman"), 0o755))
			require.NoError(t, os.WriteFile(filepath.Join(f.repo, ".foreman", "notes"), []byte("x"), 0o644))
			gitIn(t, f.repo, "add", ".foreman/notes")
			gitIn(t, f.repo, "commit", "-q", "-m", "track .foreman")
		}, "StateDir", "is tracked by git: .foreman/notes"},
		{"a worktree root that is a symbolic link", func(t *testing.T, f *fixture, elsewhere string) {
			require.NoError(t, os.Symlink(elsewhere, filepath.Join(f.repo, ".worktrees")))
		}, "Merge.Root", "is a symbolic link"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := newFixture(t)
			elsewhere := t.TempDir()
			tc.prepare(t, f, elsewhere)
			_, err := team.New(context.Background(), f.cfg)
			require.ErrorIs(t, err, team.ErrInvalidConfig)
			require.ErrorIs(t, err, merge.ErrUnsafeDir)
			var ce *team.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tc.field, ce.Field)
			assert.Contains(t, err.Error(), tc.reason)
			entries, err := os.ReadDir(elsewhere)
			require.NoError(t, err)
			assert.Empty(t, entries, "nothing was written where the link points")
		})
	}
}

func gitIn(t *testing.T, dir string, args ...string) {
	t.Helper()
	g := gitexec.Runner{Env: append(demo.IsolatedGitConfig(), demo.GitEnv()...)}
	_, err := g.Run(context.Background(), dir, args...)
	require.NoError(t, err, "git %v", args)
}
