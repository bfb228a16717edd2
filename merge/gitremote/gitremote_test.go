package gitremote_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkerPushesLeaderMergesOnce(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	worker, leader := open(t, remote, nil), open(t, remote, nil)

	work(t, worker, "s1", "feature.txt", "feature\n")
	res, err := leader.Merge(ctx, "s1", merge.Request{Title: "add the feature"})
	require.NoError(t, err)
	assert.Equal(t, merge.Merged, res.Status)
	assert.True(t, res.Pushed)
	assert.Equal(t, res.Commit, git(t, remote, "rev-parse", "main"))
	assert.Equal(t, "feature", git(t, remote, "show", "main:feature.txt"))
	assert.Equal(t, 1, trailerCommits(t, remote, "s1"))

	again, err := leader.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.AlreadyMerged, again.Status)
	assert.Equal(t, res.Commit, again.Commit)
	assert.Equal(t, 1, trailerCommits(t, remote, "s1"))
}

func TestLaterStageOnAnotherHostContinuesPushedWork(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	first, second := open(t, remote, nil), open(t, remote, nil)

	head := work(t, first, "s1", "a.txt", "a\n")
	wt, err := second.Checkout(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "a\n", readFile(t, wt.Path, "a.txt"), "the second host starts from what the first pushed")
	assert.Equal(t, head, git(t, wt.Path, "rev-parse", "HEAD"))
	writeFile(t, wt.Path, "b.txt", "b\n")
	_, err = second.Push(ctx, "s1", "s1: more")
	require.NoError(t, err)

	// Back on the first host: its worktree is behind the remote, so it is made again.
	wt, err = first.Checkout(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, "b\n", readFile(t, wt.Path, "b.txt"))
}

func TestStaleWorkerCannotOverwriteANewerAttempt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	stale, fresh := open(t, remote, nil), open(t, remote, nil)

	_, err := stale.Checkout(ctx, "s1")
	require.NoError(t, err)
	newer := work(t, fresh, "s1", "x.txt", "newer\n")

	path, err := stale.Manager().Path("s1")
	require.NoError(t, err)
	writeFile(t, path, "x.txt", "stale\n")
	_, err = stale.Push(ctx, "s1", "s1: stale")
	var moved *gitremote.BranchMovedError
	require.ErrorAs(t, err, &moved)
	assert.ErrorIs(t, err, gitremote.ErrBranchMoved)
	assert.Equal(t, "", moved.Want)
	assert.Equal(t, newer, moved.Got)
	assert.Equal(t, newer, git(t, remote, "rev-parse", "foreman/s1"), "the newer attempt's work stays")

	_, err = open(t, remote, nil).Push(ctx, "s1", "")
	assert.ErrorIs(t, err, gitremote.ErrNotCheckedOut)
}

// Two mergers in two clones land the same item at the same moment, many
// times over: the remote's main gets exactly one commit with its trailer.
func TestRacingMergersLandAnItemOnce(t *testing.T) {
	stress.Long(t) // real races by repetition; TestLostRaceFetchesAndLandsOnTheNewTip loses one deterministically
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	worker := open(t, remote, nil)
	mergers := []*gitremote.Clone{open(t, remote, nil), open(t, remote, nil)}
	items := stress.Size(1, 3) // each race is the same code path; CI runs three
	for i := range items {
		id := foreman.ItemID(fmt.Sprintf("s%d", i))
		work(t, worker, id, string(id)+".txt", string(id)+"\n")
		var wg sync.WaitGroup
		results := make([]merge.Result, len(mergers))
		errs := make([]error, len(mergers))
		start := make(chan struct{})
		for j, m := range mergers {
			wg.Go(func() {
				<-start
				results[j], errs[j] = m.Merge(ctx, id, merge.Request{})
			})
		}
		close(start)
		wg.Wait()
		for j := range mergers {
			require.NoError(t, errs[j], "merger %d, %s", j, id)
			assert.True(t, results[j].Pushed)
		}
		statuses := []merge.Status{results[0].Status, results[1].Status}
		assert.ElementsMatch(t, []merge.Status{merge.Merged, merge.AlreadyMerged}, statuses, "%s", id)
		assert.Equal(t, results[0].Commit, results[1].Commit)
		assert.Equal(t, 1, trailerCommits(t, remote, id), "%s", id)
	}
	assert.Equal(t, fmt.Sprint(items+1), git(t, remote, "rev-list", "--count", "main"), "one commit per item, linear")
}

// Two mergers landing different items at once: the loser of each race
// fetches, squashes onto the winner's commit and lands after it.
func TestRacingMergersOfDifferentItemsBothLand(t *testing.T) {
	stress.Long(t) // real races by repetition; TestLostRaceFetchesAndLandsOnTheNewTip loses one deterministically
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	worker := open(t, remote, nil)
	mergers := []*gitremote.Clone{open(t, remote, nil), open(t, remote, nil)}
	rounds := stress.Size(1, 2)
	for r := range rounds {
		ids := []foreman.ItemID{foreman.ItemID(fmt.Sprintf("a%d", r)), foreman.ItemID(fmt.Sprintf("b%d", r))}
		for _, id := range ids {
			work(t, worker, id, string(id)+".txt", string(id)+"\n")
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		for j, m := range mergers {
			wg.Go(func() {
				<-start
				res, err := m.Merge(ctx, ids[j], merge.Request{})
				assert.NoError(t, err)
				assert.Equal(t, merge.Merged, res.Status)
			})
		}
		close(start)
		wg.Wait()
		for _, id := range ids {
			assert.Equal(t, 1, trailerCommits(t, remote, id), "%s", id)
			assert.Equal(t, string(id), git(t, remote, "show", "main:"+string(id)+".txt"))
		}
	}
	assert.Equal(t, fmt.Sprint(2*rounds+1), git(t, remote, "rev-list", "--count", "main"))
}

// interloper makes the remote's pre-receive hook move main to a commit of
// its own the first times times a push arrives, as another merger would.
func interloper(t *testing.T, remote string, times int) string {
	t.Helper()
	git(t, remote, "branch", "other", "main")
	tree := git(t, remote, "rev-parse", "main^{tree}")
	other := git(t, remote, "commit-tree", tree, "-p", "main", "-m", "another merger's commit")
	counter := filepath.Join(t.TempDir(), "count")
	hook := fmt.Sprintf(`#!/bin/sh
unset GIT_QUARANTINE_PATH
n=$(cat %[1]q 2>/dev/null || echo 0)
if [ "$n" -lt %[2]d ]; then
  echo $((n+1)) > %[1]q
  git update-ref refs/heads/main %[3]s
fi
exit 0
`, counter, times, other)
	require.NoError(t, os.WriteFile(filepath.Join(remote, "hooks", "pre-receive"), []byte(hook), 0o755))
	return other
}

func TestLostRaceFetchesAndLandsOnTheNewTip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	work(t, open(t, remote, nil), "s1", "f.txt", "f\n")
	other := interloper(t, remote, 1)
	leader := open(t, remote, nil)

	res, err := leader.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.Merged, res.Status)
	assert.Equal(t, other, res.Previous, "squashed again onto the tip the other merger pushed")
	assert.Equal(t, res.Commit, git(t, remote, "rev-parse", "main"))
	assert.Equal(t, 1, trailerCommits(t, remote, "s1"))
}

func TestRaceLostEveryTimeIsATypedError(t *testing.T) {
	stress.Long(t) // the lost race TestLostRaceFetchesAndLandsOnTheNewTip makes, every time
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	work(t, open(t, remote, nil), "s1", "f.txt", "f\n")
	interloper(t, remote, 1)
	leader := open(t, remote, func(c *gitremote.Config) { c.MaxAttempts = 1 })

	_, err := leader.Merge(ctx, "s1", merge.Request{})
	var race *gitremote.RaceError
	require.ErrorAs(t, err, &race)
	assert.ErrorIs(t, err, gitremote.ErrLostRace)
	assert.Equal(t, 1, race.Attempts)
	assert.Equal(t, 0, trailerCommits(t, remote, "s1"))

	// Later, with the remote quiet, the same clone lands it.
	res, err := leader.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.Merged, res.Status)
	assert.Equal(t, 1, trailerCommits(t, remote, "s1"))
}

func TestMergeOfAnItemTheRemoteLacks(t *testing.T) {
	t.Parallel()
	_, err := open(t, newRemote(t), nil).Merge(context.Background(), "nowhere", merge.Request{})
	assert.ErrorIs(t, err, merge.ErrNoBranch)
}

func TestOpenRefusesBadConfigAndAnotherRemote(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := gitremote.Open(ctx, gitremote.Config{Dir: t.TempDir()})
	assert.ErrorIs(t, err, gitremote.ErrInvalidConfig)

	c := open(t, newRemote(t), nil)
	_, err = gitremote.Open(ctx, gitremote.Config{Remote: newRemote(t), Dir: c.Dir()})
	assert.ErrorIs(t, err, gitremote.ErrWrongRemote)

	_, err = gitremote.Open(ctx, gitremote.Config{Remote: filepath.Join(t.TempDir(), "missing.git"), Dir: filepath.Join(t.TempDir(), "c")})
	assert.Error(t, err)
}

func readFile(t testing.TB, dir, name string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(data)
}
