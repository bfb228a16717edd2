package team

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/gitexec"
)

// The git side of conflict triage: rebasing a story's branch in its
// worktree, reading a stopped rebase's conflicts for the agent, and never
// leaving a rebase in progress.

// rebaseResult is a rebase's outcome: clean (the branch now at head), or
// conflicting in files, with both sides in context (the rebase aborted).
type rebaseResult struct {
	clean   bool
	head    string
	files   []string
	context string
}

// git is a runner with the team's git settings (binary, environment, the
// identity of the commits Foreman makes).
func (t *Team) git() *gitexec.Runner {
	mc := t.cfg.Merge
	return &gitexec.Runner{Git: mc.Git, Env: mc.GitEnv, Author: gitexec.Identity(mc.Author), Committer: gitexec.Identity(mc.Committer)}
}

// rebaseOnto rebases the story's branch onto the target in its worktree.
// A conflict is aborted after its context is read, and whatever happens
// (ctx ending mid-rebase too) the worktree is left with no rebase in
// progress.
func (t *Team) rebaseOnto(ctx context.Context, item foreman.ItemID, dir string) (res rebaseResult, err error) {
	g := t.git()
	target := t.mgr.Target()
	if err := abortRebase(ctx, g, dir); err != nil { // a crashed host's leftover
		return res, err
	}
	status, err := g.Run(ctx, dir, "status", "--porcelain")
	if err != nil {
		return res, err
	}
	if strings.TrimSpace(status) != "" {
		// The merge commits pending work first, so this is a worktree a
		// person or an agent is changing: not the triage's to touch.
		return rebaseResult{files: statusFiles(status),
			context: "The worktree has uncommitted changes, so the team did not rebase it:\n" + clipBytes(status, maxContextPerFile)}, nil
	}
	defer func() {
		if ctx.Err() != nil {
			// Killed mid-rebase: leave no rebase in progress behind.
			_ = abortRebase(context.WithoutCancel(ctx), g, dir)
		}
	}()
	_, rerr := g.Run(ctx, dir, "rebase", "-q", "--no-verify", "refs/heads/"+target)
	if rerr == nil {
		head, err := g.Run(ctx, dir, "rev-parse", "HEAD")
		return rebaseResult{clean: true, head: strings.TrimSpace(head)}, err
	}
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	files, err := g.Lines(ctx, dir, "diff", "--name-only", "--diff-filter=U")
	if err != nil {
		return res, err
	}
	if len(files) == 0 {
		res.context = "git rebase onto " + target + " failed: " + clipBytes(rerr.Error(), maxContextPerFile)
	} else {
		res.files = files
		res.context = conflictContext(dir, target, files)
	}
	if err := abortRebase(ctx, g, dir); err != nil {
		return res, err
	}
	return res, nil
}

// abortRebase aborts a rebase in progress in dir, if there is one.
func abortRebase(ctx context.Context, g *gitexec.Runner, dir string) error {
	in, err := rebaseInProgress(ctx, g, dir)
	if err != nil || !in {
		return err
	}
	_, err = g.Run(ctx, dir, "rebase", "--abort")
	return err
}

// rebaseInProgress reports whether a rebase is stopped in dir.
func rebaseInProgress(ctx context.Context, g *gitexec.Runner, dir string) (bool, error) {
	l, plain := gitexec.ReadLayout(dir, g.Env)
	for _, name := range []string{"rebase-merge", "rebase-apply"} {
		p := filepath.Join(l.GitDir, name) // where git keeps a rebase's state
		if !plain {
			out, err := g.Run(ctx, dir, "rev-parse", "--path-format=absolute", "--git-path", name)
			if err != nil {
				return false, err
			}
			p = strings.TrimSpace(out)
		}
		if _, err := os.Stat(p); err == nil {
			return true, nil
		}
	}
	return false, nil
}

// conflictContext renders a stopped rebase's conflicts for the agent:
// per file, the conflicting hunks with both sides, bounded in size.
func conflictContext(dir, target string, files []string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rebasing your branch onto %s conflicts in %s. The team aborted the rebase, so your worktree is as you left it.\n", target, strings.Join(files, ", "))
	fmt.Fprintf(&b, "In each hunk below, the lines after <<<<<<< are %s's (with the work that landed since your branch started), the lines after ======= are yours.\n", target)
	for i, f := range files {
		if i == maxContextFiles {
			fmt.Fprintf(&b, "\n(and %d more files)\n", len(files)-i)
			break
		}
		data, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(f)))
		hunks := ""
		switch {
		case err != nil:
			hunks = "(no file in the worktree: deleted on one side and changed on the other)"
		default:
			hunks = conflictHunks(string(data), target, 3, maxContextPerFile)
			if hunks == "" {
				hunks = "(no conflict markers: a conflict of the file's name, mode or type)"
			}
		}
		fmt.Fprintf(&b, "\n--- %s\n%s\n", f, hunks)
		if b.Len() > maxContextTotal {
			break
		}
	}
	return clipBytes(b.String(), maxContextTotal)
}

// conflictHunks extracts the conflict-marked regions of a file with ctx
// lines around each, relabelling the markers (the target's side, yours),
// at most max bytes.
func conflictHunks(content, target string, ctx, max int) string {
	lines := strings.Split(content, "\n")
	keep := make([]bool, len(lines))
	in := false
	start := 0
	for i, l := range lines {
		switch {
		case strings.HasPrefix(l, "<<<<<<< "), l == "<<<<<<<":
			in, start = true, i
		case in && (strings.HasPrefix(l, ">>>>>>> ") || l == ">>>>>>>"):
			for j := max0(start - ctx); j <= min(i+ctx, len(lines)-1); j++ {
				keep[j] = true
			}
			in = false
		}
	}
	var b strings.Builder
	last := -1
	for i, l := range lines {
		if !keep[i] {
			continue
		}
		if last >= 0 && i > last+1 {
			b.WriteString("...\n")
		}
		switch {
		case strings.HasPrefix(l, "<<<<<<<"):
			l = "<<<<<<< " + target
		case strings.HasPrefix(l, ">>>>>>>"):
			l = ">>>>>>> yours" + strings.TrimPrefix(l, ">>>>>>>")
		}
		b.WriteString(l + "\n")
		last = i
	}
	return clipBytes(strings.TrimSuffix(b.String(), "\n"), max)
}

func max0(n int) int { return max(n, 0) }

// clipBytes keeps at most n bytes of s, saying what was cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "\n[... cut]"
	return strings.ToValidUTF8(s[:max0(n-len(cut))], "") + cut
}

// statusFiles reads the paths of `git status --porcelain`.
func statusFiles(status string) []string {
	var out []string
	for _, l := range strings.Split(status, "\n") {
		if len(l) > 3 {
			out = append(out, strings.TrimSpace(l[3:]))
		}
	}
	return out
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}
