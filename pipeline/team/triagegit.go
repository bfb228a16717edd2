package team

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
)

// The rebase of conflict triage: merge.Manager.Rebase does the git work
// (the rebase in the story's worktree, reading a conflict's both sides,
// the abort, and never leaving a rebase in progress, ctx ending too); the
// team turns what it found into what the story's builder is told.

// rebaseResult is a rebase's outcome: clean (the branch now at head), or
// not (the rebase aborted, or never started) with the files and what the
// builder is told in context.
type rebaseResult struct {
	clean   bool
	head    string
	files   []string
	context string
}

// rebaseOnto rebases the story's branch onto the target in its worktree.
// What stops the rebase and a person or the builder can resolve (a
// conflict, uncommitted changes, git refusing) is a rebaseResult that is
// not clean; any other error is the team's.
func (t *Team) rebaseOnto(ctx context.Context, item foreman.ItemID) (rebaseResult, error) {
	head, err := t.mgr.Rebase(ctx, item, merge.RebaseOptions{MaxFiles: maxContextFiles, MaxFileBytes: maxContextPerFile, MaxBytes: maxContextTotal})
	target := t.mgr.Target()
	var (
		conflict *merge.ConflictError
		dirty    *merge.DirtyError
		stopped  *merge.RebaseError
	)
	switch {
	case err == nil:
		return rebaseResult{clean: true, head: head}, nil
	case errors.As(err, &conflict):
		return rebaseResult{files: conflict.Files, context: conflictContext(target, conflict)}, nil
	case errors.As(err, &dirty):
		// The merge commits pending work first, so this is a worktree a
		// person or an agent is changing: not the triage's to touch.
		return rebaseResult{files: dirty.Files, context: "The worktree has uncommitted changes, so the team did not rebase it:\n" +
			clipBytes(strings.Join(dirty.Files, "\n"), maxContextPerFile)}, nil
	case errors.As(err, &stopped):
		return rebaseResult{context: "git rebase onto " + target + " failed: " + clipBytes(strings.TrimPrefix(stopped.Error(), "merge: "), maxContextPerFile)}, nil
	}
	return rebaseResult{}, err
}

// conflictContext renders a stopped rebase's conflicts for the agent: per
// file, the conflicting hunks with both sides, as merge read them
// (bounded), the target's side labelled with its name and the agent's
// "yours".
func conflictContext(target string, c *merge.ConflictError) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Rebasing your branch onto %s conflicts in %s. The team aborted the rebase, so your worktree is as you left it.\n", target, strings.Join(c.Files, ", "))
	fmt.Fprintf(&b, "In each hunk below, the lines after <<<<<<< are %s's (with the work that landed since your branch started), the lines after ======= are yours.\n", target)
	for _, f := range c.Conflicts {
		fmt.Fprintf(&b, "\n--- %s\n%s\n", f.Path, fileHunks(target, f))
	}
	if n := len(c.Files) - len(c.Conflicts); n > 0 {
		fmt.Fprintf(&b, "\n(and %d more files)\n", n)
	}
	return clipBytes(b.String(), maxContextTotal)
}

// fileHunks renders one file's conflicts, "..." between hunks that are
// apart.
func fileHunks(target string, f merge.ConflictFile) string {
	switch {
	case f.Missing:
		return "(no file in the worktree: deleted on one side and changed on the other)"
	case len(f.Hunks) == 0 && f.Clipped:
		return "(its hunks left out: the conflict context is at its limit)"
	case len(f.Hunks) == 0:
		return "(no conflict markers: a conflict of the file's name, mode or type)"
	}
	var lines []string
	for i, h := range f.Hunks {
		if i > 0 && h.Line != f.Hunks[i-1].End() {
			lines = append(lines, "...")
		}
		lines = append(lines, h.Before...)
		lines = append(lines, "<<<<<<< "+target)
		lines = append(lines, h.Target...)
		if h.Base != nil {
			lines = append(lines, "||||||| base")
			lines = append(lines, h.Base...)
		}
		lines = append(lines, "=======")
		lines = append(lines, h.Item...)
		lines = append(lines, strings.TrimSpace(">>>>>>> yours "+h.Label))
		lines = append(lines, h.After...)
	}
	if f.Clipped {
		lines = append(lines, "[... cut]")
	}
	return strings.Join(lines, "\n")
}

// clipBytes keeps at most n bytes of s, saying what was cut.
func clipBytes(s string, n int) string {
	if len(s) <= n {
		return s
	}
	const cut = "\n[... cut]"
	return strings.ToValidUTF8(s[:max(n-len(cut), 0)], "") + cut
}
