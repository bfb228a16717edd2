package merge

import (
	"context"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/stretchr/testify/require"
)

// benchRepo is a repository of 300 files, a small project's worth, so that
// git's own per-command cost dominates as it does in real use.
func benchRepo(b *testing.B) string {
	files := map[string]string{}
	for i := range 300 {
		files[fmt.Sprintf("pkg%02d/file%03d.go", i%20, i)] = fmt.Sprintf("package pkg\n\n// %d\nvar X%d = %d\n", i, i, i)
	}
	return newRepo(b, files)
}

// BenchmarkItemCycle measures one item's full cycle (create a worktree,
// commit in it, squash-merge it onto the checked-out main, remove it and its
// branch) through Manager and through the raw git commands, alternating
// within one run so both see the same machine. It reports both per-cycle
// times and their ratio (target: ≤ 1.1).
func BenchmarkItemCycle(b *testing.B) {
	ctx := context.Background()
	repo := benchRepo(b)
	m := newManager(b, repo, func(c *Config) { c.DeleteBranchOnRemove = true })
	clk := foreman.RealClock()
	var ours, raw, oursMerge, rawMerge time.Duration
	for i := 0; b.Loop(); i++ {
		start := clk.Now()
		id := foreman.ItemID(fmt.Sprintf("ours-%d", i))
		wt, err := m.Create(ctx, id)
		require.NoError(b, err)
		commitFile(b, wt.Path, fmt.Sprintf("ours/%d.txt", i), "work\n", "work")
		mergeStart := clk.Now()
		_, err = m.Merge(ctx, id, Request{Title: "cycle"})
		require.NoError(b, err)
		oursMerge += clk.Since(mergeStart)
		require.NoError(b, m.Remove(ctx, id))
		ours += clk.Since(start)

		start = clk.Now()
		rawMerge += rawCycle(b, repo, i)
		raw += clk.Since(start)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64(ours/n), "ours-ns/cycle")
	b.ReportMetric(float64(raw/n), "raw-ns/cycle")
	b.ReportMetric(float64(ours)/float64(raw), "ratio")
	b.ReportMetric(float64(oursMerge/n), "ours-merge-ns")
	b.ReportMetric(float64(rawMerge/n), "raw-merge-ns")
	b.ReportMetric(float64(oursMerge)/float64(rawMerge), "merge-ratio")
}

// rawCycle is the same cycle as a shell script of git commands would run
// it; it returns the time of its merge step (merge --squash and commit).
func rawCycle(b *testing.B, repo string, i int) time.Duration {
	clk := foreman.RealClock()
	branch := fmt.Sprintf("raw/%d", i)
	path := filepath.Join(repo, ".worktrees", fmt.Sprintf("raw-%d", i))
	git(b, repo, "worktree", "add", "-q", "-b", branch, path, "main")
	commitFile(b, path, fmt.Sprintf("raw/%d.txt", i), "work\n", "work")
	start := clk.Now()
	git(b, repo, "merge", "--squash", "-q", branch)
	git(b, repo, "commit", "-q", "-m", fmt.Sprintf("raw-%d: cycle\n\nForeman-Item: raw-%d", i, i))
	merge := clk.Since(start)
	git(b, repo, "worktree", "remove", "--force", path)
	git(b, repo, "branch", "-q", "-D", branch)
	return merge
}
