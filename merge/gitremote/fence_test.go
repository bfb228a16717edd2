package gitremote_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestAFencedOffLeaderLandsNothing(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	worker := open(t, remote, nil)
	work(t, worker, "s1", "one.txt", "one\n")
	work(t, worker, "s2", "two.txt", "two\n")
	old, next := open(t, remote, nil), open(t, remote, nil)

	require.NoError(t, old.Fence(ctx, 1))
	first, err := old.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	require.Equal(t, merge.Merged, first.Status)

	// A new leader takes over while the old one is paused, then the old one
	// resumes and tries to land the next story.
	require.NoError(t, next.Fence(ctx, 2))
	_, err = old.Merge(ctx, "s2", merge.Request{})
	var fenced *gitremote.FencedError
	require.ErrorAs(t, err, &fenced)
	assert.ErrorIs(t, err, gitremote.ErrFenced)
	assert.Equal(t, int64(1), fenced.Term)
	assert.Equal(t, int64(2), fenced.Newer)
	assert.Equal(t, first.Commit, git(t, remote, "rev-parse", "main"), "the fenced-off push landed nothing")
	assert.Equal(t, 0, trailerCommits(t, remote, "s2"))
	assert.ErrorIs(t, old.Fence(ctx, 1), gitremote.ErrFenced, "an older term cannot take the fence back")

	landed, err := next.Merge(ctx, "s2", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.Merged, landed.Status)
	assert.Equal(t, landed.Commit, git(t, remote, "rev-parse", "main"))
	assert.Equal(t, 1, trailerCommits(t, remote, "s2"))
	again, err := next.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.AlreadyMerged, again.Status, "what the old leader landed in its term stays landed once")
	assert.Contains(t, git(t, remote, "log", "-1", "--format=%B", gitremote.FenceRef), "Foreman-Leader-Term: 2")
}

func TestTheSameTermFencesAgainAndAdoptsItsOwnFence(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	worker := open(t, remote, nil)
	work(t, worker, "s1", "one.txt", "one\n")
	work(t, worker, "s2", "two.txt", "two\n")
	// Two clones of one leader (a restart keeps its term): each push moves
	// the fence, and the other finds it moved by its own term.
	a, b := open(t, remote, nil), open(t, remote, nil)
	require.NoError(t, a.Fence(ctx, 3))
	require.NoError(t, b.Fence(ctx, 3))
	_, err := b.Merge(ctx, "s1", merge.Request{})
	require.NoError(t, err)
	res, err := a.Merge(ctx, "s2", merge.Request{})
	require.NoError(t, err)
	assert.Equal(t, merge.Merged, res.Status)
	assert.Equal(t, 1, trailerCommits(t, remote, "s1"))
	assert.Equal(t, 1, trailerCommits(t, remote, "s2"))
}

func TestFenceRefusesABadTermAndAForeignRef(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	remote := newRemote(t)
	c := open(t, remote, nil)
	assert.ErrorIs(t, c.Fence(ctx, 0), gitremote.ErrInvalidConfig)

	// Something else than a fence commit at the fence's ref.
	git(t, remote, "update-ref", gitremote.FenceRef, "main")
	err := c.Fence(ctx, 1)
	require.ErrorIs(t, err, gitremote.ErrRemote)
	assert.Contains(t, err.Error(), "not a fence commit")
	assert.NoDirExists(t, filepath.Join(remote, "refs", "foreman", "leader.lock"))
}
