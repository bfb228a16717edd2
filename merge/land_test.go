package merge

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// A post-merge hook in the target's checkout that undoes the fast-forward is
// a realistic "something else wrote to the repository at the same time": the
// merge itself succeeds, and only reading the target back can tell.
func TestMergeVerifyCatchesATargetThatDidNotMove(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	wt := create(t, m, "v")
	commitFile(t, wt.Path, "v.txt", "v\n", "v")
	old := revParse(t, repo, "main")
	hook := filepath.Join(repo, ".git", "hooks", "post-merge")
	writeFile(t, filepath.Dir(hook), "post-merge", "#!/bin/sh\nexec git reset -q --hard HEAD~1\n")
	require.NoError(t, os.Chmod(hook, 0o755))

	res, err := m.Merge(ctx, "v", Request{Title: "V"})
	var verr *VerifyError
	require.ErrorAs(t, err, &verr)
	assert.Equal(t, "main", verr.Target)
	assert.Equal(t, old, verr.Got, "the hook put the target back")
	assert.NotEqual(t, old, verr.Want)
	assert.Contains(t, err.Error(), "did not advance")
	assert.NotEqual(t, Merged, res.Status)
	assert.Equal(t, old, revParse(t, repo, "main"))
	assert.Empty(t, porcelain(t, repo))
	assert.Empty(t, porcelain(t, wt.Path))
	assert.NoFileExists(t, filepath.Join(repo, ".git", "MERGE_HEAD"))

	// Nothing carries the item's trailer, so once the hook is gone a retry
	// lands it, once.
	require.NoError(t, os.Remove(hook))
	res, err = m.Merge(ctx, "v", Request{Title: "V"})
	require.NoError(t, err)
	assert.Equal(t, Merged, res.Status)
	// The retry writes the same squash again: same tree, parent and message.
	// Its hash may differ, since git stamps the commit with the current second.
	for _, part := range []string{"^{tree}", "^"} {
		assert.Equal(t, revParse(t, repo, verr.Want+part), revParse(t, repo, res.Commit+part), part)
	}
	assert.Equal(t, git(t, repo, "log", "-1", "--format=%B", verr.Want), git(t, repo, "log", "-1", "--format=%B", res.Commit))
	assert.Equal(t, old, revParse(t, repo, "main^"))
}

// verify's other two reasons cannot be produced through Merge (the commit it
// checks is the one Merge just wrote), so they are checked directly.
func TestVerifyRejectsATipThatIsNotTheSquashOnTheOldTip(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	repo := newRepo(t, nil)
	m := newManager(t, repo, nil)
	root := revParse(t, repo, "main")
	noTrailer := commitFile(t, repo, "a.txt", "a\n", "v: no trailer")
	withTrailer := commitFile(t, repo, "b.txt", "b\n", "v: with trailer\n\nForeman-Item: v")

	cases := []struct {
		name                string
		target, tip, commit string
		reason              string
	}{
		{"target elsewhere", noTrailer, root, withTrailer, "did not advance"},
		{"not on the old tip", withTrailer, root, withTrailer, "not on the previous tip"},
		{"no trailer", noTrailer, root, noTrailer, "lacks the item's trailer"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			git(t, repo, "update-ref", "refs/heads/main", tc.target)
			err := m.verify(ctx, "v", tc.tip, tc.commit)
			var verr *VerifyError
			require.ErrorAs(t, err, &verr)
			assert.Contains(t, verr.Reason, tc.reason)
		})
	}
	git(t, repo, "update-ref", "refs/heads/main", withTrailer)
	assert.NoError(t, m.verify(ctx, "v", noTrailer, withTrailer))
}
