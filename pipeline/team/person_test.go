package team_test

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestSkipLetsDependentsStartAndAbandonKeepsThemBlocked(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.fail-stage-1")
	f.touch(t, "C.fail-stage-1")
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx,
		team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b", After: []foreman.ItemID{"A"}},
		team.Story{ID: "C", Title: "c"}, team.Story{ID: "D", Title: "d", After: []foreman.ItemID{"C"}},
	))
	res := run(t, tm)
	require.Equal(t, 2, res.Paused, res.String())
	require.Equal(t, 2, res.Blocked)

	st, err := tm.Status(ctx)
	require.NoError(t, err)
	require.Len(t, st.Escalations, 2)
	text := st.Text()
	assert.Contains(t, text, "Waiting for a person (Resolve: retry, resume, skip, abandon)")
	assert.Contains(t, text, "boom 1")
	data, err := st.JSON()
	require.NoError(t, err)
	var back team.Status
	require.NoError(t, json.Unmarshal(data, &back))
	assert.Len(t, back.Stories, 4)

	require.NoError(t, tm.Resolve(ctx, "A", team.Skip, "done by hand"))
	require.NoError(t, tm.Resolve(ctx, "C", team.Abandon, "not needed"))
	res = run(t, tm)
	assert.Equal(t, team.StorySkipped, stateOf(res, "A").State)
	assert.Equal(t, team.StoryMerged, stateOf(res, "B").State, "B starts once A is skipped")
	assert.Equal(t, team.StoryAbandoned, stateOf(res, "C").State)
	assert.Equal(t, team.StoryBlocked, stateOf(res, "D").State)
	assert.Equal(t, []foreman.ItemID{"C"}, stateOf(res, "D").BlockedBy)
	assert.Equal(t, []string{"B"}, trailers(t, f.repo))
}

func TestResumeGoesOnFromTheNextStage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.nogo")
	f.cfg.Story = pipeline.StoryConfig{ValidationRetries: -1} // the first NO-GO pauses
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	res := run(t, tm)
	s := stateOf(res, "A")
	require.Equal(t, team.StoryPaused, s.State, res.String())
	assert.Contains(t, s.Pause.Message, "the story is unclear")
	// A person rewrote the story and vouches for it: resume skips the
	// validation the agent would fail again.
	require.NoError(t, tm.Resolve(ctx, "A", team.Resume, "rewritten"))
	res = run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "A").State, res.String())
}

func TestSubscribeReplaysAndFollows(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tm := f.newTeam(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	sub := tm.Subscribe(ctx, 0)
	first := <-sub
	assert.Equal(t, uint64(1), first.Seq)
	assert.Equal(t, team.EventStoryAdded, first.Kind)

	res := run(t, tm)
	require.Equal(t, 1, res.Merged)
	var kinds []team.EventKind
	for e := range sub {
		assert.Equal(t, first.Seq+uint64(len(kinds))+1, e.Seq, "in order, none missed")
		kinds = append(kinds, e.Kind)
		if e.Kind == team.EventRunFinished {
			assert.Contains(t, e.Detail, "1 merged")
			break
		}
	}
	assert.Equal(t, team.EventRunStarted, kinds[0])
	assert.Contains(t, kinds, team.EventStageStarted)
	assert.Contains(t, kinds, team.EventStoryMerged)

	// A late subscriber from a sequence number gets the rest.
	all := tm.Events(0)
	late := tm.Subscribe(ctx, all[len(all)-2].Seq)
	e := <-late
	assert.Equal(t, all[len(all)-1], e)
	cancel()
	_, open := <-late
	assert.False(t, open, "closed when its context ends")
}

func TestASlowSubscriberDoesNotHoldUpTheTeam(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	tm := f.newTeam(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	_ = tm.Subscribe(ctx, 0) // never read
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b"}))
	type outcome struct {
		res team.Result
		err error
	}
	done := make(chan outcome, 1)
	go func() {
		res, err := tm.Run(ctx)
		done <- outcome{res, err}
	}()
	select {
	case o := <-done:
		require.NoError(t, o.err)
		assert.Equal(t, 2, o.res.Merged)
	case <-time.After(90 * time.Second):
		t.Fatal("the team waited for a subscriber")
	}
}

func TestTaskFlowIsOneBuildStage(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.cfg.Flow = pipeline.TaskFlow(pipeline.StoryConfig{})
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "T1", Title: "a task"}))
	res := run(t, tm)
	assert.Equal(t, 1, res.Merged, res.String())
	var stages []int
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStageFinished {
			stages = append(stages, e.Stage)
			assert.Equal(t, "builder", e.Role)
		}
	}
	assert.Equal(t, []int{0}, stages)
}

func TestRunTwiceAtOnceAndAfterClose(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "A.fail-stage-0")
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	started := make(chan struct{})
	f.cfg.OnEvent = nil
	sub := tm.Subscribe(ctx, 0)
	go func() {
		for e := range sub {
			if e.Kind == team.EventRunStarted {
				close(started)
				return
			}
		}
	}()
	done := make(chan error)
	go func() { _, err := tm.Run(ctx); done <- err }()
	<-started
	_, err := tm.Run(ctx)
	assert.ErrorIs(t, err, team.ErrRunning)
	require.NoError(t, <-done)
	require.NoError(t, tm.Close())
	require.NoError(t, tm.Close(), "twice")
	_, err = tm.Run(ctx)
	assert.ErrorIs(t, err, team.ErrClosed)
	assert.ErrorIs(t, tm.Add(ctx, team.Story{ID: "B", Title: "b"}), team.ErrClosed)
}

func TestConfigErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	cases := map[string]func(c *team.Config){
		"Repo":    func(c *team.Config) { c.Repo = "" },
		"Agent":   func(c *team.Config) { c.Agent = nil },
		"Gates":   func(c *team.Config) { c.Gates.Levels = nil },
		"Workers": func(c *team.Config) { c.Workers = -1 },
		"Stages":  func(c *team.Config) { c.Stages = []team.Stage{{Kind: team.StageBuild}} },
	}
	for field, mutate := range cases {
		t.Run(field, func(t *testing.T) {
			cfg := f.cfg
			mutate(&cfg)
			_, err := team.New(context.Background(), cfg)
			require.Error(t, err)
			assert.ErrorIs(t, err, team.ErrInvalidConfig)
			var ce *team.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, field, ce.Field)
		})
	}
}

// A repository the team cannot use is a ConfigError naming the cause, not
// git's own words about a missing program or an unknown branch.
func TestUnusableRepositoriesAreConfigErrors(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	gitInit := func(t *testing.T, dir string, args ...string) {
		t.Helper()
		cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
		out, err := cmd.CombinedOutput()
		require.NoError(t, err, string(out))
	}
	cases := map[string]struct {
		repo  func(t *testing.T) string
		field string
		says  string
		is    error
	}{
		"missing directory": {func(t *testing.T) string { return filepath.Join(t.TempDir(), "nope") }, "Repo", "no such file or directory", os.ErrNotExist},
		"a file": {func(t *testing.T) string {
			p := filepath.Join(t.TempDir(), "f")
			require.NoError(t, os.WriteFile(p, nil, 0o644))
			return p
		}, "Repo", "is not a directory", nil},
		"no commit yet": {func(t *testing.T) string {
			dir := t.TempDir()
			gitInit(t, dir, "init", "-q", "-b", "main")
			return dir
		}, "Merge.TargetBranch", "needs one first", merge.ErrUnknownBranch},
		"branch master": {func(t *testing.T) string {
			dir := t.TempDir()
			gitInit(t, dir, "init", "-q", "-b", "master")
			gitInit(t, dir, "-c", "user.name=a", "-c", "user.email=a@example.com", "commit", "-q", "--allow-empty", "-m", "first")
			return dir
		}, "Merge.TargetBranch", "Config.Merge.TargetBranch", merge.ErrUnknownBranch},
	}
	for name, tt := range cases {
		t.Run(name, func(t *testing.T) {
			cfg := f.cfg
			cfg.Repo, cfg.StateDir = tt.repo(t), ""
			_, err := team.New(context.Background(), cfg)
			require.Error(t, err)
			assert.ErrorIs(t, err, team.ErrInvalidConfig)
			var ce *team.ConfigError
			require.ErrorAs(t, err, &ce)
			assert.Equal(t, tt.field, ce.Field)
			assert.Contains(t, err.Error(), tt.says)
			if tt.is != nil {
				assert.ErrorIs(t, err, tt.is)
			}
		})
	}
}

func TestEventsAreKeptAndNumberedOnAcrossRestarts(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	ctx := context.Background()
	first := f.newTeam(t)
	require.NoError(t, first.Add(ctx, team.Story{ID: "A", Title: "a"}))
	run(t, first)
	before := first.Events(0)
	require.NotEmpty(t, before)
	require.NoError(t, first.Close())

	// A new host on the same repository sees the earlier events and
	// numbers on.
	second := f.newTeam(t)
	assert.JSONEq(t, mustJSON(t, before), mustJSON(t, second.Events(0)))
	require.NoError(t, second.Add(ctx, team.Story{ID: "B", Title: "b"}))
	all := second.Events(0)
	require.Greater(t, len(all), len(before))
	for i, e := range all {
		assert.Equal(t, uint64(i+1), e.Seq)
	}
	// A subscriber that saw up to the third event of the first host
	// gets the rest, stored and live, in order.
	sub := second.Subscribe(ctx, 3)
	for want := uint64(4); want <= uint64(len(all)); want++ {
		assert.Equal(t, want, (<-sub).Seq)
	}
	assert.Equal(t, all[len(all)-1].Seq, second.Events(uint64(len(all) - 1))[0].Seq)
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	data, err := json.Marshal(v)
	require.NoError(t, err)
	return string(data)
}

func TestRepoMayBeAnyPathInsideTheRepository(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	sub := filepath.Join(f.repo, "sub", "dir")
	require.NoError(t, os.MkdirAll(sub, 0o755))
	f.cfg.Repo = sub
	tm := f.newTeam(t)
	assert.Equal(t, f.repo, tm.Repo())
	assert.DirExists(t, filepath.Join(f.repo, team.StateDirName))
	assert.NoDirExists(t, filepath.Join(sub, team.StateDirName))

	f.cfg.Repo = t.TempDir() // not a repository
	_, err := team.New(context.Background(), f.cfg)
	var ce *team.ConfigError
	require.ErrorAs(t, err, &ce)
	assert.Equal(t, "Repo", ce.Field)
}

// A person's decision may reach the task graph twice at once: from Resolve,
// and from a Run starting that moment (a host runs again as soon as a
// person decided). Both succeed, and the story is released once.
func TestADecisionCarriedTwiceAtOnceReleasesTheStoryOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.touch(t, "US-001.fail-stage-0")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "US-001", Title: "first"}))
	require.Equal(t, 1, run(t, tm).Paused)

	errs := make(chan error, 9)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			<-start
			for range 50 {
				if err := team.ApplyDecision(tm, ctx, "US-001"); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	wg.Go(func() {
		<-start
		errs <- tm.Resolve(ctx, "US-001", team.Retry, "")
	})
	close(start)
	wg.Wait()
	close(errs)
	for err := range errs {
		assert.NoError(t, err)
	}

	f.remove(t, "US-001.fail-stage-0")
	assert.Equal(t, 1, run(t, tm).Merged)
	// Released once: one decision recorded, and the planner ran once
	// before the pause and once after it, not once per carrier.
	resolved := 0
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStoryResolved {
			resolved++
		}
	}
	assert.Equal(t, 1, resolved, "one decision")
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "US-001 stage 0 "), "the plan stage ran again once:\n%s", log)
}

func TestSubscribeFromLastSeqFollowsFromNow(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	tm := f.newTeam(t)
	assert.Zero(t, tm.LastSeq(), "nothing recorded yet")
	require.NoError(t, tm.Add(ctx, team.Story{ID: "A", Title: "a"}))
	require.Equal(t, 1, run(t, tm).Merged)
	last := tm.LastSeq()
	evs := tm.Events(0)
	require.NotEmpty(t, evs)
	assert.Equal(t, evs[len(evs)-1].Seq, last)
	assert.Equal(t, team.EventRunFinished, evs[len(evs)-1].Kind)

	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	sub := tm.Subscribe(subCtx, tm.LastSeq())
	require.NoError(t, tm.Add(ctx, team.Story{ID: "B", Title: "b"}))
	first := <-sub
	assert.Equal(t, last+1, first.Seq, "the first event after the subscription, not an old run's")
	assert.Equal(t, team.EventStoryAdded, first.Kind)
	assert.Equal(t, foreman.ItemID("B"), first.Story)
}

// A retry's record that a crash kept after the flow acted on it decides
// no later pause: the story waits for a person again, and the person's
// new decision is taken (not refused as "already resolved").
func TestADecisionKeptByACrashDecidesNoLaterPause(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	f := newFixture(t)
	f.touch(t, "US-001.fail-stage-0")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(ctx, team.Story{ID: "US-001", Title: "first"}))
	require.Equal(t, 1, run(t, tm).Paused)
	require.NoError(t, tm.Resolve(ctx, "US-001", team.Retry, ""))
	kept, err := team.DecisionRecord(tm, ctx, "US-001")
	require.NoError(t, err)
	require.NotNil(t, kept)
	require.Equal(t, 1, run(t, tm).Paused, "retried, and paused again")
	cleared, err := team.DecisionRecord(tm, ctx, "US-001")
	require.NoError(t, err)
	require.Nil(t, cleared, "the flow acted on the decision: cleared")

	require.NoError(t, team.PutDecisionRecord(tm, ctx, "US-001", kept)) // as a crash before the clearing left it
	res := run(t, tm)
	require.Equal(t, 1, res.Paused, "the earlier pause's retry does not restart this one: %s", res)
	planned := func() int {
		log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
		require.NoError(t, err)
		return strings.Count(string(log), "US-001 stage 0 ")
	}
	assert.Equal(t, 2, planned(), "the plan stage ran before each pause, not a third time")

	require.NoError(t, tm.Resolve(ctx, "US-001", team.Retry, "once more"), "a decision about this pause is taken")
	f.remove(t, "US-001.fail-stage-0")
	assert.Equal(t, 1, run(t, tm).Merged)
	assert.Equal(t, 3, planned())
}
