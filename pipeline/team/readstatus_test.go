package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestReadStatusWithoutAnAgentWhileTheTeamRuns(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	_, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	assert.ErrorIs(t, err, team.ErrNoState)

	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b"}))
	// B's build waits for the checks below: the Run is still going when
	// they look, however far the subscriber lags behind the events.
	hold := filepath.Join(f.ctl, "B.hold")
	require.NoError(t, syscall.Mkfifo(hold, 0o644))
	sub := tm.Subscribe(ctx, 0)
	wait := runInBackground(t, tm)
	for e := range sub {
		if e.Kind == team.EventStageFinished {
			// Another reader (here the same process, through its own
			// read-only connection) sees the story at work.
			st, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
			require.NoError(t, err)
			require.Len(t, st.Stories, 2)
			assert.Contains(t, []team.StoryState{team.StoryRunning, team.StoryMerged}, st.Stories[0].State)
			assert.True(t, st.Running, "the run lock is held")
			require.NotNil(t, st.Host)
			assert.Equal(t, os.Getpid(), st.Host.PID)
			assert.Contains(t, st.Text(), "running in pid")
			// A second coordinator of the same team is refused.
			other, err := team.New(ctx, f.cfg)
			require.NoError(t, err)
			_, err = other.Run(ctx)
			assert.ErrorIs(t, err, team.ErrBusy)
			require.NoError(t, other.Close())
			require.NoError(t, os.WriteFile(hold, []byte("go\n"), 0o644)) // blocks until B's build reads it
			break
		}
	}
	res := wait()
	require.Equal(t, 2, res.Merged, res.String())
	st, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	for _, s := range st.Stories {
		assert.Equal(t, team.StoryMerged, s.State)
	}
	assert.False(t, st.Running, "the lock is released when Run returns")
	assert.Contains(t, st.Text(), "merged as")
	// With no run to ask and no Workers given, the count is not known
	// rather than the default's.
	assert.Zero(t, st.Workers)
	assert.True(t, strings.HasPrefix(st.Text(), "Stories\n"), st.Text())
	st, err = team.ReadStatus(ctx, team.Config{Repo: f.repo, Workers: 2})
	require.NoError(t, err)
	assert.True(t, strings.HasPrefix(st.Text(), "Stories (2 workers)\n"), st.Text())
}

// A team whose store is shared (PostgreSQL, say) is read from the store
// alone: the reader need not have the repository.
func TestReadStatusFromTheStoreAlone(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	cfg := f.cfg
	cfg.Store = store.NewMemory(store.MemoryOptions{})
	tm, err := team.New(ctx, cfg)
	require.NoError(t, err)
	defer tm.Close()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	require.Equal(t, 1, run(t, tm).Merged)

	st, err := team.ReadStatus(ctx, team.Config{Store: cfg.Store})
	require.NoError(t, err)
	require.Len(t, st.Stories, 1)
	assert.Equal(t, team.StoryMerged, st.Stories[0].State)
	assert.False(t, st.Running, "no run lock to read without the repository")
	live, err := tm.Status(ctx)
	require.NoError(t, err)
	require.NotEmpty(t, live.Containment)
	assert.Equal(t, live.Containment, st.Containment, "the run's containment, from the store")
	_, err = team.ReadStatus(ctx, team.Config{Store: store.NewMemory(store.MemoryOptions{})})
	assert.ErrorIs(t, err, team.ErrNoState)
	_, err = team.ReadStatus(ctx, team.Config{})
	assert.ErrorIs(t, err, team.ErrInvalidConfig, "neither a repository nor a store")
}

// Another process reads how the last Run's agents were contained: the Run
// records it as it starts, and ReadStatus reports it (before any Run,
// nothing).
func TestReadStatusSaysHowTheLastRunsAgentsWereContained(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	st, err := team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	assert.Empty(t, st.Containment, "no Run yet")
	assert.NotContains(t, st.Text(), "containment")

	want := f.cfg.Agent.(*agentcmd.Driver).Containment()
	require.NotEmpty(t, want)
	live, err := tm.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, want, live.Containment)
	require.Equal(t, 1, run(t, tm).Merged)
	require.NoError(t, tm.Close())
	st, err = team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	assert.Equal(t, want, st.Containment)
	assert.Contains(t, st.Text(), "Agents' containment: "+want+"\n")
	data, err := st.JSON()
	require.NoError(t, err)
	assert.Contains(t, string(data), `"containment"`)

	// The next Run's, with its agents unsandboxed, replaces it.
	cfg := f.cfg
	cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{"true"}, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
	other, err := team.New(ctx, cfg)
	require.NoError(t, err)
	defer other.Close()
	_, err = other.Run(ctx)
	require.NoError(t, err)
	st, err = team.ReadStatus(ctx, team.Config{Repo: f.repo})
	require.NoError(t, err)
	assert.Equal(t, "none: sandbox turned off (Config.Sandbox.Mode)", st.Containment)
}
