package gitsnap

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// On a clean working tree Capture diffs two trees instead of staging the
// tree into a temporary index (or skips the diff when nothing changed):
// the files, counts and diff hash must be those the staged diff gives.
func TestCaptureOfACleanTreeMatchesTheStagedDiff(t *testing.T) {
	tests := []struct {
		name       string
		dirtyStart bool
		changed    bool // the snapshot shows files
		change     func(r *testRepo)
	}{
		{"nothing changed", false, false, func(r *testRepo) {}},
		{"committed edit", false, true, func(r *testRepo) { r.write("a.txt", "a\nmore\n"); r.commitAll("edit") }},
		{"committed rename and binary", false, true, func(r *testRepo) {
			r.run("mv", "b.txt", "renamed.txt")
			r.write("bin.dat", "\x00\x01binary\x00")
			r.commitAll("rename")
		}},
		{"commit then revert", false, false, func(r *testRepo) {
			r.write("a.txt", "changed\n")
			r.commitAll("change")
			r.run("revert", "--no-edit", "HEAD")
		}},
		{"dirty start committed", true, false, func(r *testRepo) { r.commitAll("keep the dirty file") }},
		{"dirty start reset away", true, true, func(r *testRepo) { r.run("checkout", "--", "a.txt") }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "one\ntwo\nthree\nfour\n"})
			if tt.dirtyStart {
				r.write("a.txt", "dirty before the run\n")
			}
			s, _ := newTestSnapshotter()
			ctx := context.Background()
			before, err := s.Before(ctx, r.dir)
			require.NoError(t, err)
			tt.change(r)
			st, err := s.status(ctx, r.dir)
			require.NoError(t, err)
			require.Empty(t, st.dirty, "the case must end on a clean tree")

			snap := capture(t, s, r, before)
			from := before.BaseCommit
			if before.BaseTree != "" {
				from = before.BaseTree
			}
			staged, err := s.diffSince(ctx, r.dir, from, st.untracked)
			require.NoError(t, err)
			assert.Equal(t, staged.files, snap.Files)
			assert.Equal(t, staged.hash, snap.DiffHash)
			assert.Empty(t, snap.Uncommitted)
			var ins, del int
			for _, f := range staged.files {
				ins, del = ins+f.Insertions, del+f.Deletions
			}
			assert.Equal(t, ins, snap.Insertions)
			assert.Equal(t, del, snap.Deletions)
			assert.Equal(t, tt.changed, len(snap.Files) > 0)
		})
	}
}

// Capture reads an agent's commits from git's files when they are a chain
// of loose objects; git log must list the same hashes and subjects.
func TestCommitsReadFromFilesMatchGitLog(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	base := r.run("rev-parse", "HEAD")
	for i, msg := range []string{"one line", "two\nlines\n\nbody", "\n\nleading blank lines", "trailing   "} {
		r.write("a.txt", strings.Repeat("x\n", i+1))
		r.run("add", "-A")
		r.run("commit", "-q", "--cleanup=verbatim", "-m", msg)
	}
	head := r.run("rev-parse", "HEAD")
	ctx := context.Background()
	fromFiles, err := New(Config{}).commitsSince(ctx, r.dir, base, head)
	require.NoError(t, err)
	// A configuration in the environment leaves the history to git log.
	fromGit, err := New(Config{Env: []string{"GIT_CONFIG_COUNT=0"}}).commitsSince(ctx, r.dir, base, head)
	require.NoError(t, err)
	require.Len(t, fromGit, 4)
	assert.Equal(t, fromGit, fromFiles)
	assert.Equal(t, "two lines", fromFiles[1].Subject)
}
