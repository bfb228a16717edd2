package gitsnap

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// benchRepo is a 300-file repository after an agent's typical iteration:
// one commit touching 10 files, then 5 more files edited and 3 untracked.
// With dirtyStart, the user had edited 4 other files and left 2 untracked
// before the run.
func benchRepo(b *testing.B, dirtyStart bool) (*testRepo, phases.BeforeState) {
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("pkg%02d/file%03d.go", i%15, i)] = strings.Repeat(fmt.Sprintf("line %d of file %d\n", i, i), 40)
	}
	r := newRepo(b, files)
	if dirtyStart {
		for i := 100; i < 104; i++ {
			r.write(fmt.Sprintf("pkg%02d/file%03d.go", i%15, i), "user edit\n")
		}
		for i := range 2 {
			r.write(fmt.Sprintf("scratch/user%d.txt", i), "notes\n")
		}
	}
	before, err := New(Config{}).Before(context.Background(), r.dir)
	require.NoError(b, err)
	for i := range 10 {
		r.write(fmt.Sprintf("pkg%02d/file%03d.go", i%15, i), "rewritten\n")
	}
	// The agent commits only its own files, as a careful agent would.
	for i := range 10 {
		r.run("add", fmt.Sprintf("pkg%02d/file%03d.go", i%15, i))
	}
	r.run("commit", "-q", "-m", "agent work")
	for i := 10; i < 15; i++ {
		r.write(fmt.Sprintf("pkg%02d/file%03d.go", i%15, i), "edited\n")
	}
	for i := range 3 {
		r.write(fmt.Sprintf("new/untracked%d.go", i), "package new\n")
	}
	return r, before
}

// rawGit runs the same git commands Capture runs, directly with os/exec:
// the cost of git itself, which Capture should add little to. The diff is
// taken from from (the base tree after a dirty start), the log from base.
func rawGit(b *testing.B, dir, from, base string) {
	run := func(env []string, args ...string) {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), env...)
		if _, err := cmd.Output(); err != nil {
			b.Fatal(args, err)
		}
	}
	run(nil, "--no-optional-locks", "status", "--porcelain=v2", "-z", "--branch", "--untracked-files=all")
	tmp := filepath.Join(dir, ".git", "raw-bench.index")
	src, err := os.Open(filepath.Join(dir, ".git", "index"))
	require.NoError(b, err)
	dst, err := os.Create(tmp)
	require.NoError(b, err)
	_, err = io.Copy(dst, src)
	require.NoError(b, err)
	fi, err := src.Stat()
	require.NoError(b, err)
	src.Close()
	require.NoError(b, dst.Close())
	// As Capture does, so that git re-reads the same racily clean entries.
	require.NoError(b, os.Chtimes(tmp, time.Time{}, fi.ModTime()))
	env := []string{"GIT_INDEX_FILE=" + tmp}
	run(env, "add", "-A")
	run(env, "diff", "--cached", "-z", "--raw", "--numstat", "-M", "--no-abbrev", "--no-ext-diff", "--no-textconv", from, "--")
	run(nil, "log", "-z", "--reverse", "--format=%H%x00%s", base+"..HEAD", "--")
	os.Remove(tmp)
}

// BenchmarkCapture reports Capture and the raw git commands it runs, timed
// alternately in the same loop on the same repository, and their ratio,
// from a clean start and from a dirty one (diffed against BaseTree).
func BenchmarkCapture(b *testing.B) {
	for _, dirtyStart := range []bool{false, true} {
		name := "clean start"
		if dirtyStart {
			name = "dirty start"
		}
		b.Run(name, func(b *testing.B) { benchmarkCapture(b, dirtyStart) })
	}
}

func benchmarkCapture(b *testing.B, dirtyStart bool) {
	r, before := benchRepo(b, dirtyStart)
	from := before.BaseCommit
	if dirtyStart {
		require.NotEmpty(b, before.BaseTree)
		from = before.BaseTree
	}
	s := New(Config{})
	ctx := context.Background()
	snap, err := s.Capture(ctx, r.dir, before, phases.SnapshotMeta{})
	require.NoError(b, err)
	require.Len(b, snap.Files, 18)
	require.Len(b, snap.Commits, 1)
	rawGit(b, r.dir, from, before.BaseCommit)

	var captureTime, rawTime time.Duration
	for i := 0; b.Loop(); i++ {
		// Alternate which goes first so that neither always runs on a warm cache.
		first, second := func() {
			start := time.Now()
			if _, err := s.Capture(ctx, r.dir, before, phases.SnapshotMeta{}); err != nil {
				b.Fatal(err)
			}
			captureTime += time.Since(start)
		}, func() {
			start := time.Now()
			rawGit(b, r.dir, from, before.BaseCommit)
			rawTime += time.Since(start)
		}
		if i%2 == 1 {
			first, second = second, first
		}
		first()
		second()
	}
	n := float64(b.N)
	b.ReportMetric(float64(captureTime.Nanoseconds())/n, "capture-ns/op")
	b.ReportMetric(float64(rawTime.Nanoseconds())/n, "rawgit-ns/op")
	b.ReportMetric(float64(captureTime)/float64(rawTime), "capture/rawgit")
}
