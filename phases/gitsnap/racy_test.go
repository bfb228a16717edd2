package gitsnap

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// racyEdit commits orig as name, runs between, and then overwrites the file
// with edit, which must have the same size, so that git sees a same-size
// edit made in the second its index was last written: the edited file and
// the index get the modification time the index entry cached for the file.
// The entry's cached size and times then match the edited file, and only
// git's racy-clean check (the file is not older than the index) makes git
// read it again.
//
// The times are set, not waited for: they lie an hour back, so that any
// file written from now on (a copy of the index) is stamped in a later
// second; and the repository does not trust ctime (core.trustctime false),
// which cannot be set and which the edit changes. That only makes git
// trust the cached stat data more readily.
func racyEdit(t *testing.T, r *testRepo, name, orig, edit string, between func()) {
	t.Helper()
	require.Len(t, edit, len(orig))
	r.run("config", "core.trustctime", "false")
	path := filepath.Join(r.dir, name)
	then := time.Now().Add(-time.Hour).Truncate(time.Second).Add(250 * time.Millisecond)
	r.write(name, orig)
	require.NoError(t, os.Chtimes(path, then, then))
	r.run("add", "-A")
	r.run("commit", "-q", "-m", "commit "+name)
	between()
	r.write(name, edit)
	require.NoError(t, os.Chtimes(path, then, then))
	require.NoError(t, os.Chtimes(filepath.Join(r.dir, ".git", "index"), then, then))
}

// A same-size edit in the second of the last index write, captured in a
// later second, is in the diff. The temporary index once got a fresh
// modification time, so git trusted the stale cached stat data of the entry.
func TestCaptureSeesASameSizeEditMadeInTheSecondOfTheIndexWrite(t *testing.T) {
	t.Parallel()
	r := newRepo(t, nil)
	s, _ := newTestSnapshotter()
	var before phases.BeforeState
	racyEdit(t, r, "a.txt", "a\nb\n", "a\nc\n", func() {
		var err error
		before, err = s.Before(context.Background(), r.dir)
		require.NoError(t, err)
	})
	require.Empty(t, before.BaseTree, "clean when Before ran")

	snap := capture(t, s, r, before)
	assert.Equal(t, []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1}}, snap.Files)
	assert.Equal(t, []string{"a.txt"}, snap.Uncommitted)
}

// The same race on the Before path: BaseTree holds the user's edit, so the
// agent is not credited with it, and a do-nothing run stays empty.
func TestBeforeKeepsASameSizeEditMadeInTheSecondOfTheIndexWrite(t *testing.T) {
	t.Parallel()
	r := newRepo(t, nil)
	racyEdit(t, r, "a.txt", "a\nb\n", "a\nc\n", func() {})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	require.Equal(t, []string{"a.txt"}, before.DirtyFiles)
	require.NotEmpty(t, before.BaseTree)
	assert.Equal(t, "a\nc", r.run("cat-file", "blob", before.BaseTree+":a.txt"))

	assert.True(t, capture(t, s, r, before).Empty())
}
