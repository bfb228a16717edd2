package team_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/team"
)

// A store keeps the plan of one repository: the same repository opens it
// again (from any clone of it); another is refused, since its stories'
// merges are not there and going on would report them merged.
func TestAStoreServesTheRepositoryItWasFirstUsedWith(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	db := store.NewMemory(store.MemoryOptions{})
	f := newFixture(t)
	f.cfg.Store = db
	require.NoError(t, f.newTeam(t).Close())
	require.NoError(t, f.newTeam(t).Close(), "the same repository again")

	clone := filepath.Join(t.TempDir(), "clone")
	out, err := exec.Command("git", "clone", "-q", f.repo, clone).CombinedOutput()
	require.NoError(t, err, "%s", out)
	fromClone := f.cfg
	fromClone.Repo = clone
	tm, err := team.New(ctx, fromClone)
	require.NoError(t, err, "another host's clone of the same repository")
	require.NoError(t, tm.Close())

	other := filepath.Join(t.TempDir(), "other")
	_, err = testrepo.New(other, "main", testrepo.Commit{Message: "another project", Author: gitexec.Identity{Name: "t", Email: "t@example.com"}})
	require.NoError(t, err)
	elsewhere := f.cfg
	elsewhere.Repo = other
	_, err = team.New(ctx, elsewhere)
	var mismatch *team.OtherRepositoryError
	require.ErrorAs(t, err, &mismatch)
	assert.ErrorIs(t, err, team.ErrOtherRepository)
	assert.Equal(t, "main", mismatch.Target)
	assert.NotEqual(t, mismatch.Root, mismatch.Recorded)
	assert.Contains(t, err.Error(), "give each repository a store of its own")
}
