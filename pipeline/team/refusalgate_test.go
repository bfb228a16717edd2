package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// By default a story whose agent was refused does not land on its own: it
// pauses before its merge with its refusals as the cause, the story beside
// it lands, and a person's Resume lands it; a second Resume asks nothing
// more (the refusals were seen). A Retry or Resume of a story that is not
// paused sees nothing.
func TestAStoryWhoseAgentWasRefusedWaitsForAPersonBeforeItLands(t *testing.T) {
	if !agentcmd.New(agentcmd.Config{Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}).Sandboxed() {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI needs the OS sandbox")
		}
		t.Skip("no OS sandbox here")
	}
	ctx := context.Background()
	hostHome := t.TempDir()
	t.Setenv("HOME", hostHome) // not parallel: the sandbox hides the host's $HOME
	repo := filepath.Join(hostileBase(t), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	body := strings.NewReplacer("%REPO%", demo.ShellQuote(repo), "%HOSTHOME%", demo.ShellQuote(hostHome)).Replace(writerAgent)
	script, err := demo.WriteScript(t.TempDir(), "writer.sh", body)
	require.NoError(t, err)
	tm, err := team.New(ctx, team.Config{
		Repo: repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(),
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}),
		Gates: gatePlan(),
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	})
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "HONEST", Title: "honest"},
		team.Story{ID: "WRITER", Title: "writes where it cannot see"}))

	res := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "HONEST").State, res.String())
	w := stateOf(res, "WRITER")
	require.Equal(t, team.StoryPaused, w.State, res.String())
	require.NotNil(t, w.Pause)
	assert.Contains(t, w.Pause.Message, "its agents were refused 4 time(s) since a person last looked (the last: the OS sandbox: wrote")
	assert.Contains(t, w.Pause.Message, "Resume lands it as it is")
	assert.Equal(t, []string{"HONEST"}, trailers(t, repo), "only the honest story landed")

	require.ErrorIs(t, tm.Resolve(ctx, "HONEST", team.Resume, ""), team.ErrNotPaused, "a merged story is not resolved")
	require.NoError(t, tm.Resolve(ctx, "WRITER", team.Resume, "looked at its diff: fine"))
	res = run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "WRITER").State, res.String())
	assert.ElementsMatch(t, []string{"HONEST", "WRITER"}, trailers(t, repo))
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.Refused, "still counted after it landed")
}
