package gitsnap

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
)

var testIdentity = gitexec.Identity{Name: "Test", Email: "test@example.com"}

type testRepo struct {
	t   testing.TB
	dir string
	git *gitexec.Runner
}

// TestMain keeps the machine's git configuration out of every git the tests
// start (internal/testrepo; its repositories turn auto maintenance off).
func TestMain(m *testing.M) {
	if err := testrepo.IsolateGit(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	os.Exit(m.Run())
}

// newRepo makes a repository with one commit holding files, or with no
// commit for no files (written without git: internal/testrepo).
func newRepo(t testing.TB, files map[string]string) *testRepo {
	t.Helper()
	r := &testRepo{t: t, dir: t.TempDir(), git: &gitexec.Runner{Author: testIdentity}}
	if len(files) == 0 {
		require.NoError(t, testrepo.Init(r.dir, "main"))
		return r
	}
	_, err := testrepo.New(r.dir, "main", testrepo.Commit{Files: files, Author: testIdentity})
	require.NoError(t, err)
	return r
}

func (r *testRepo) run(args ...string) string {
	r.t.Helper()
	out, err := r.git.Run(context.Background(), r.dir, args...)
	require.NoError(r.t, err)
	return strings.TrimSpace(out)
}

func (r *testRepo) write(name, content string) {
	r.t.Helper()
	p := filepath.Join(r.dir, name)
	require.NoError(r.t, os.MkdirAll(filepath.Dir(p), 0o755))
	require.NoError(r.t, os.WriteFile(p, []byte(content), 0o644))
}

func (r *testRepo) commitAll(msg string) string {
	r.t.Helper()
	r.run("add", "-A")
	r.run("commit", "-q", "-m", msg)
	return r.run("rev-parse", "HEAD")
}

func newTestSnapshotter() (*Snapshotter, *clock.Fake) {
	fc := clock.NewFake(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC))
	return New(Config{Clock: fc}), fc
}

func capture(t *testing.T, s *Snapshotter, r *testRepo, before phases.BeforeState) phases.Snapshot {
	t.Helper()
	snap, err := s.Capture(context.Background(), r.dir, before, phases.SnapshotMeta{RunID: "run-1", Iteration: 1})
	require.NoError(t, err)
	return snap
}

func TestBeforeRecordsHeadAndDirtyFiles(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	head := r.run("rev-parse", "HEAD")
	r.write("a.txt", "changed\n")
	r.write("new dir/untracked file.txt", "u\n")
	statusBefore := r.run("status", "--porcelain")
	s, fc := newTestSnapshotter()

	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	assert.Equal(t, head, before.BaseCommit)
	assert.Equal(t, []string{"a.txt", "new dir/untracked file.txt"}, before.DirtyFiles)
	assert.Equal(t, fc.Now(), before.CapturedAt)
	// The dirty starting point is kept as a tree of the working tree's content.
	require.NotEmpty(t, before.BaseTree)
	assert.Equal(t, "a.txt\nb.txt\nnew dir/untracked file.txt", r.run("ls-tree", "-r", "--name-only", before.BaseTree))
	assert.Equal(t, "changed", r.run("cat-file", "blob", before.BaseTree+":a.txt"))
	assert.Equal(t, statusBefore, r.run("status", "--porcelain"), "Before leaves the user's index alone")
}

func TestBeforeOnACleanWorkspaceRecordsNoTree(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	assert.Equal(t, r.run("rev-parse", "HEAD"), before.BaseCommit)
	assert.Empty(t, before.BaseTree, "a clean start is measured from BaseCommit, as before")
	assert.Empty(t, before.DirtyFiles)
}

// Edits the user had made before the run are not the agent's: they neither
// make a do-nothing agent's snapshot non-empty nor enter its diff.
func TestCaptureIgnoresFilesDirtyBeforeTheRun(t *testing.T) {
	dirty := func(r *testRepo) {
		r.write("a.txt", "a\nuser edit\n")
		r.write("staged.txt", "user staged\n")
		r.run("add", "staged.txt")
		r.write("notes.txt", "user notes\n")
	}
	tests := []struct {
		name        string
		agent       func(r *testRepo)
		wantFiles   []phases.FileDiff
		commits     []string
		uncommitted []string
	}{
		{name: "agent does nothing", agent: func(*testRepo) {}},
		{
			name:        "agent changes another file",
			agent:       func(r *testRepo) { r.write("b.txt", "1\n2\n3\n4\n") },
			wantFiles:   []phases.FileDiff{{Path: "b.txt", Status: "M", Insertions: 1}},
			uncommitted: []string{"b.txt"},
		},
		{
			name:        "agent edits a file the user had edited",
			agent:       func(r *testRepo) { r.write("a.txt", "a\nuser edit\nagent edit\n") },
			wantFiles:   []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 1}},
			uncommitted: []string{"a.txt"},
		},
		{
			name:        "agent deletes the user's untracked file",
			agent:       func(r *testRepo) { require.NoError(t, os.Remove(filepath.Join(r.dir, "notes.txt"))) },
			wantFiles:   []phases.FileDiff{{Path: "notes.txt", Status: "D", Deletions: 1}},
			uncommitted: nil, // gone from the working tree, so not dirty any more
		},
		{
			name:      "agent commits everything, the user's edits included",
			agent:     func(r *testRepo) { r.write("b.txt", "1\n2\n3\n4\n"); r.commitAll("agent work") },
			wantFiles: []phases.FileDiff{{Path: "b.txt", Status: "M", Insertions: 1}},
			commits:   []string{"agent work"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "1\n2\n3\n"})
			dirty(r)
			s, _ := newTestSnapshotter()
			before, err := s.Before(context.Background(), r.dir)
			require.NoError(t, err)
			require.NotEmpty(t, before.BaseTree)
			tt.agent(r)

			snap := capture(t, s, r, before)
			assert.Equal(t, tt.wantFiles, snap.Files)
			assert.Equal(t, tt.uncommitted, snap.Uncommitted)
			var subjects []string
			for _, c := range snap.Commits {
				subjects = append(subjects, c.Subject)
			}
			assert.Equal(t, tt.commits, subjects)
			assert.Equal(t, tt.wantFiles == nil && tt.commits == nil, snap.Empty())
			ins, del := 0, 0
			for _, f := range tt.wantFiles {
				ins += f.Insertions
				del += f.Deletions
			}
			assert.Equal(t, ins, snap.Insertions)
			assert.Equal(t, del, snap.Deletions)
			assert.Equal(t, before.BaseCommit, snap.BaseCommit)

			// The DiffHash is the agent's change alone: the same change from a
			// clean start hashes the same.
			clean := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "1\n2\n3\n"})
			dirty(clean)
			clean.commitAll("the user's edits, committed")
			cleanBefore, err := s.Before(context.Background(), clean.dir)
			require.NoError(t, err)
			require.Empty(t, cleanBefore.BaseTree)
			tt.agent(clean)
			assert.Equal(t, capture(t, s, clean, cleanBefore).DiffHash, snap.DiffHash)
		})
	}
}

func TestCaptureAfterADirtyStartInAnUnbornRepository(t *testing.T) {
	r := newRepo(t, nil)
	r.write("a.txt", "user\n")
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	assert.Equal(t, emptyTreeSHA1, before.BaseCommit)
	require.NotEmpty(t, before.BaseTree)

	assert.True(t, capture(t, s, r, before).Empty())

	r.write("b.txt", "agent\n")
	r.commitAll("first")
	snap := capture(t, s, r, before)
	assert.Equal(t, []phases.FileDiff{{Path: "b.txt", Status: "A", Insertions: 1}}, snap.Files)
	require.Len(t, snap.Commits, 1)
	assert.Empty(t, snap.Uncommitted)
}

func TestCaptureReportsEachKindOfChange(t *testing.T) {
	binary := "\x00\x01\x02binary\x00"
	tests := []struct {
		name        string
		change      func(r *testRepo)
		wantFiles   []phases.FileDiff
		commits     []string
		uncommitted []string
	}{
		{
			name:      "committed change",
			change:    func(r *testRepo) { r.write("a.txt", "a\nmore\n"); r.commitAll("add more") },
			wantFiles: []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 1}},
			commits:   []string{"add more"},
		},
		{
			name:        "uncommitted change counts",
			change:      func(r *testRepo) { r.write("a.txt", "x\ny\n") },
			wantFiles:   []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 2, Deletions: 1}},
			uncommitted: []string{"a.txt"},
		},
		{
			name:        "staged change counts",
			change:      func(r *testRepo) { r.write("a.txt", "x\n"); r.run("add", "a.txt") },
			wantFiles:   []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 1, Deletions: 1}},
			uncommitted: []string{"a.txt"},
		},
		{
			name:        "untracked file counts",
			change:      func(r *testRepo) { r.write("sub/new.txt", "1\n2\n3\n") },
			wantFiles:   []phases.FileDiff{{Path: "sub/new.txt", Status: "?", Insertions: 3}},
			uncommitted: []string{"sub/new.txt"},
		},
		{
			name:        "ignored file does not count",
			change:      func(r *testRepo) { r.write(".gitignore", "*.log\n"); r.write("x.log", "noise\n") },
			wantFiles:   []phases.FileDiff{{Path: ".gitignore", Status: "?", Insertions: 1}},
			uncommitted: []string{".gitignore"},
		},
		{
			name:        "deletion",
			change:      func(r *testRepo) { require.NoError(t, os.Remove(filepath.Join(r.dir, "b.txt"))) },
			wantFiles:   []phases.FileDiff{{Path: "b.txt", Status: "D", Deletions: 3}},
			uncommitted: []string{"b.txt"},
		},
		{
			name:      "committed rename",
			change:    func(r *testRepo) { r.run("mv", "b.txt", "c.txt"); r.commitAll("rename") },
			wantFiles: []phases.FileDiff{{Path: "c.txt", Status: "R"}},
			commits:   []string{"rename"},
		},
		{
			name: "uncommitted rename by plain mv",
			change: func(r *testRepo) {
				require.NoError(t, os.Rename(filepath.Join(r.dir, "b.txt"), filepath.Join(r.dir, "c.txt")))
			},
			wantFiles:   []phases.FileDiff{{Path: "c.txt", Status: "R"}},
			uncommitted: []string{"b.txt", "c.txt"},
		},
		{
			name:        "binary file",
			change:      func(r *testRepo) { r.write("blob.bin", binary) },
			wantFiles:   []phases.FileDiff{{Path: "blob.bin", Status: "?", Binary: true}},
			uncommitted: []string{"blob.bin"},
		},
		{
			name: "commit plus uncommitted on top",
			change: func(r *testRepo) {
				r.write("a.txt", "a\nb\n")
				r.commitAll("one")
				r.write("a.txt", "a\nb\nc\n")
				r.commitAll("two")
				r.write("d.txt", "d\n")
			},
			wantFiles:   []phases.FileDiff{{Path: "a.txt", Status: "M", Insertions: 2}, {Path: "d.txt", Status: "?", Insertions: 1}},
			commits:     []string{"one", "two"},
			uncommitted: []string{"d.txt"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "1\n2\n3\n"})
			s, fc := newTestSnapshotter()
			before, err := s.Before(context.Background(), r.dir)
			require.NoError(t, err)
			tt.change(r)
			fc.Advance(time.Minute)

			snap := capture(t, s, r, before)
			assert.Equal(t, tt.wantFiles, snap.Files)
			var subjects []string
			for _, c := range snap.Commits {
				subjects = append(subjects, c.Subject)
				assert.Len(t, c.Hash, 40)
			}
			assert.Equal(t, tt.commits, subjects)
			assert.Equal(t, tt.uncommitted, snap.Uncommitted)
			assert.False(t, snap.Empty())
			assert.Equal(t, r.run("rev-parse", "HEAD"), snap.HeadCommit)
			assert.Equal(t, before.BaseCommit, snap.BaseCommit)
			assert.Equal(t, fc.Now(), snap.CapturedAt)
			assert.Equal(t, phases.RunID("run-1"), snap.RunID)
			assert.Equal(t, 1, snap.Iteration)
			assert.Equal(t, r.dir, snap.WorkspacePath)
			assert.Regexp(t, `^snap-[0-9a-f]{16}$`, snap.ID)
			ins, del := 0, 0
			for _, f := range tt.wantFiles {
				ins += f.Insertions
				del += f.Deletions
			}
			assert.Equal(t, ins, snap.Insertions)
			assert.Equal(t, del, snap.Deletions)
		})
	}
}

func TestCaptureWithoutChangeIsEmpty(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)

	snap := capture(t, s, r, before)
	assert.True(t, snap.Empty())
	assert.Zero(t, snap.Insertions+snap.Deletions)
	assert.NotEmpty(t, snap.DiffHash)
}

func TestDiffHashIdentifiesContent(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)

	r.write("a.txt", "a\nb\n")
	first := capture(t, s, r, before)
	again := capture(t, s, r, before)
	assert.Equal(t, first.DiffHash, again.DiffHash, "same diff, same hash")

	r.commitAll("commit it")
	committed := capture(t, s, r, before)
	assert.Equal(t, first.DiffHash, committed.DiffHash, "committing does not change the content")

	// A same-size edit, often in the second the commit wrote the index: it
	// is seen only because the temporary index keeps the index's time (see
	// TestCaptureSeesASameSizeEditMadeInTheSecondOfTheIndexWrite).
	r.write("a.txt", "a\nc\n")
	different := capture(t, s, r, before)
	assert.NotEqual(t, first.DiffHash, different.DiffHash)

	// The same change made again in another clone of the same base hashes equal.
	r2 := newRepo(t, map[string]string{"a.txt": "a\n"})
	before2, err := s.Before(context.Background(), r2.dir)
	require.NoError(t, err)
	r2.write("a.txt", "a\nb\n")
	assert.Equal(t, first.DiffHash, capture(t, s, r2, before2).DiffHash)
}

func TestCaptureLeavesTheUserIndexAlone(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	r.write("a.txt", "staged\n")
	r.run("add", "a.txt")
	r.write("a.txt", "staged then edited\n")
	r.write("b.txt", "unstaged\n")
	r.write("new.txt", "untracked\n")
	indexBytes, err := os.ReadFile(filepath.Join(r.dir, ".git", "index"))
	require.NoError(t, err)
	stagedBefore := r.run("diff", "--cached", "--name-status")
	statusBefore := r.run("status", "--porcelain")

	snap := capture(t, s, r, before)
	assert.Len(t, snap.Files, 3)

	after, err := os.ReadFile(filepath.Join(r.dir, ".git", "index"))
	require.NoError(t, err)
	assert.Equal(t, indexBytes, after, "index file unchanged byte for byte")
	assert.Equal(t, stagedBefore, r.run("diff", "--cached", "--name-status"))
	assert.Equal(t, statusBefore, r.run("status", "--porcelain"))
	leftovers, err := filepath.Glob(filepath.Join(r.dir, ".git", "foreman-gitsnap-*"))
	require.NoError(t, err)
	assert.Empty(t, leftovers, "temporary index removed")
}

func TestUnbornHead(t *testing.T) {
	r := newRepo(t, nil)
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	assert.Equal(t, emptyTreeSHA1, before.BaseCommit)

	empty := capture(t, s, r, before)
	assert.True(t, empty.Empty())
	assert.Empty(t, empty.HeadCommit)

	r.write("a.txt", "a\n")
	untracked := capture(t, s, r, before)
	assert.Equal(t, []phases.FileDiff{{Path: "a.txt", Status: "?", Insertions: 1}}, untracked.Files)

	r.commitAll("first")
	committed := capture(t, s, r, before)
	assert.Equal(t, []phases.FileDiff{{Path: "a.txt", Status: "A", Insertions: 1}}, committed.Files)
	require.Len(t, committed.Commits, 1)
	assert.Equal(t, "first", committed.Commits[0].Subject)
	assert.Equal(t, untracked.DiffHash, committed.DiffHash)
}

func TestLinkedWorktree(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	wt := filepath.Join(t.TempDir(), "wt")
	r.run("worktree", "add", "-q", "-b", "item", wt)
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), wt)
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(wt, "n.txt"), []byte("n\n"), 0o644))

	snap := capture(t, s, &testRepo{t: t, dir: wt}, before)
	assert.Equal(t, []phases.FileDiff{{Path: "n.txt", Status: "?", Insertions: 1}}, snap.Files)
}

func TestNotARepository(t *testing.T) {
	s, _ := newTestSnapshotter()
	for name, dir := range map[string]string{
		"plain directory": t.TempDir(),
		"missing":         filepath.Join(t.TempDir(), "nope"),
	} {
		t.Run(name, func(t *testing.T) {
			t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir))
			_, err := s.Before(context.Background(), dir)
			var nre *NotRepositoryError
			require.ErrorAs(t, err, &nre)
			assert.Equal(t, dir, nre.Path)
			assert.ErrorIs(t, err, ErrNotRepository)

			_, err = s.Capture(context.Background(), dir, phases.BeforeState{BaseCommit: emptyTreeSHA1}, phases.SnapshotMeta{})
			assert.ErrorIs(t, err, ErrNotRepository)
		})
	}
}

func TestCaptureNeedsABase(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	s, _ := newTestSnapshotter()
	_, err := s.Capture(context.Background(), r.dir, phases.BeforeState{}, phases.SnapshotMeta{})
	assert.ErrorIs(t, err, ErrInvalidBefore)
}

func TestCancelledContext(t *testing.T) {
	r := newRepo(t, map[string]string{"a.txt": "a\n"})
	s, _ := newTestSnapshotter()
	before, err := s.Before(context.Background(), r.dir)
	require.NoError(t, err)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()

	_, err = s.Before(ctx, r.dir)
	assert.ErrorIs(t, err, context.Canceled)
	_, err = s.Capture(ctx, r.dir, before, phases.SnapshotMeta{})
	assert.ErrorIs(t, err, context.Canceled)
	assert.False(t, errors.Is(err, ErrNotRepository))
}
