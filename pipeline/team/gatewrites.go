package team

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
)

// A gate check runs the story's code in the story's worktree, which it may
// write: build outputs a .gitignore names are its own business, but a file
// it adds or changes there is not in the change it verified, and the team
// commits the worktree's changes when the story lands. A new user's trial
// had a hostile test write what it collected into the worktree, and it
// landed; a test rewriting a source file after it passed would land
// unverified. So the worktree is looked at before and after the gates, and
// what they changed is a refusal of the story's (it waits for a person,
// who sees the paths).

// maxWorktreeEntries bounds the entries worktreeState reads the content
// of: a worktree with more changes than that is compared by their names
// and sizes beyond it.
const maxWorktreeEntries = 2000

// maxGateWriteNames bounds the paths a note names.
const maxGateWriteNames = 5

// worktreeState is what of a worktree would land: HEAD, and each path git
// reports changed or untracked (ignored files not), with a digest of its
// content.
type worktreeState struct {
	head  string
	paths map[string]string
}

// readWorktreeState reads dir's state; an error when git cannot tell.
func readWorktreeState(ctx context.Context, git *gitexec.Runner, dir string) (worktreeState, error) {
	head, err := git.Run(ctx, dir, "rev-parse", "-q", "--verify", "HEAD")
	if err != nil {
		head = "" // an unborn branch
	}
	// --no-optional-locks: a status refreshes the index under index.lock
	// when it can; this read must write nothing, and a team killed while
	// it ran left a git still holding that lock in the story's worktree,
	// where the restarted team's merge found it (a chaos seed).
	out, err := git.Run(ctx, dir, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=all", "--no-renames")
	if err != nil {
		return worktreeState{}, err
	}
	st := worktreeState{head: strings.TrimSpace(head), paths: map[string]string{}}
	for i, rec := range strings.Split(out, "\x00") {
		if len(rec) < 4 {
			continue
		}
		path := rec[3:]
		st.paths[path] = digestPath(filepath.Join(dir, path), i < maxWorktreeEntries)
	}
	return st, nil
}

// digestPath is a digest of what is at p: a file's content (its size
// only when !content), a link's target, "gone" when nothing is.
func digestPath(p string, content bool) string {
	info, err := os.Lstat(p)
	switch {
	case err != nil:
		return "gone"
	case info.Mode()&os.ModeSymlink != 0:
		target, _ := os.Readlink(p)
		return "link:" + target
	case !info.Mode().IsRegular():
		return info.Mode().Type().String()
	case !content:
		return "size:" + strconv.FormatInt(info.Size(), 10)
	}
	f, err := os.Open(p)
	if err != nil {
		return "unreadable"
	}
	defer func() { _ = f.Close() }()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "unreadable"
	}
	return fmt.Sprintf("%s:%x", info.Mode().Perm(), h.Sum(nil))
}

// changedBy says what changed between before and after, as a note; ""
// when nothing did.
func changedBy(before, after worktreeState) string {
	var names []string
	for _, p := range slices.Sorted(maps.Keys(after.paths)) {
		if b, ok := before.paths[p]; !ok || b != after.paths[p] {
			names = append(names, p)
		}
	}
	for _, p := range slices.Sorted(maps.Keys(before.paths)) {
		if _, ok := after.paths[p]; !ok {
			names = append(names, p+" (put back as committed)")
		}
	}
	var what []string
	if before.head != after.head {
		what = append(what, fmt.Sprintf("moved HEAD from %.12s to %.12s", before.head, after.head))
	}
	if len(names) > 0 {
		shown := make([]string, 0, maxGateWriteNames+1)
		for i, n := range names {
			if i == maxGateWriteNames {
				shown = append(shown, fmt.Sprintf("and %d more", len(names)-i))
				break
			}
			shown = append(shown, strconv.Quote(n))
		}
		what = append(what, "changed "+strings.Join(shown, ", "))
	}
	if len(what) == 0 {
		return ""
	}
	return "the gates " + strings.Join(what, " and ") + " in the worktree they verified: the change that lands is not the one they checked " +
		"(what a check writes there is committed with the story; a build output belongs in .gitignore)"
}
