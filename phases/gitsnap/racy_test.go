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

// These tests wait for a real file-system timestamp to enter a new second:
// git's racy-clean check compares file and index modification times, which
// the fake clock cannot move. Each wait is at most about a second.

// modSecond is the whole second of path's modification time.
func modSecond(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	require.NoError(t, err)
	return fi.ModTime().Unix()
}

// waitForFileSecondAfter returns once a file written in dir is stamped in a
// later second than sec. It asks the file system rather than time.Now: file
// times come from the kernel's coarse clock, which may lag a few ms behind.
func waitForFileSecondAfter(t *testing.T, dir string, sec int64) {
	t.Helper()
	probe := filepath.Join(dir, "foreman-test-clock-probe")
	defer os.Remove(probe)
	for {
		require.NoError(t, os.WriteFile(probe, nil, 0o644))
		if modSecond(t, probe) > sec {
			return
		}
		time.Sleep(max(time.Millisecond, time.Until(time.Unix(sec+1, 0))))
	}
}

// racyEdit commits orig as name, runs between, and then overwrites the file
// with edit, which must have the same size, all within one file-system
// second. The index entry's cached size and times then match the edited
// file, and only git's racy-clean check (the file is not older than the
// index) makes git read it again. If a second boundary falls in the middle,
// it starts again at the start of a new second. On return, files written
// from now on are stamped in a later second than the edit.
func racyEdit(t *testing.T, r *testRepo, name, orig, edit string, between func()) {
	t.Helper()
	require.Len(t, edit, len(orig))
	gitDir := filepath.Join(r.dir, ".git")
	path := filepath.Join(r.dir, name)
	for attempt := 0; ; attempt++ {
		require.Less(t, attempt, 10, "ten tries at fitting a commit and an edit in one second")
		if attempt > 0 {
			t.Logf("a second boundary fell between commit and edit; trying again (attempt %d)", attempt+1)
			waitForFileSecondAfter(t, gitDir, modSecond(t, path))
		}
		r.write(name, orig)
		written := modSecond(t, path)
		// From the second attempt on, orig is what HEAD already has: the
		// commit is empty, but add still rewrites the index with the file's
		// new times, which is the write this needs.
		r.run("add", "-A")
		r.run("commit", "-q", "--allow-empty", "-m", "commit "+name)
		between()
		r.write(name, edit)
		if written == modSecond(t, path) && written == modSecond(t, filepath.Join(gitDir, "index")) {
			waitForFileSecondAfter(t, gitDir, written)
			return
		}
	}
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
