package gitremote

import (
	"context"
	"fmt"
	"strconv"
	"strings"
)

// FenceRef is the ref on the shared repository that records the newest
// leader term a merger has fenced it with (see Clone.Fence).
const FenceRef = "refs/foreman/leader"

// emptyTree is git's well-known empty tree, which every repository has
// without storing it. Fence commits carry no files.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// termTrailer names the term in a fence commit's message.
const termTrailer = "Foreman-Leader-Term: "

// Fence makes the shared repository refuse merges from any leader whose
// term is older than term, and makes every later Merge of this Clone
// conditional on no newer term having fenced it since.
//
// Leadership decided elsewhere (a lease in a database) cannot stop a leader
// that was paused while it still led: once resumed, it may push before it
// learns that it lost. The fence moves that check into the push itself. A
// new leader calls Fence with its term before it merges anything; FenceRef
// then names a commit (with no files) that carries the term, and each Merge
// pushes the target and a new fence commit atomically (git push --atomic),
// on condition that both are as this Clone left them. An old leader's push
// therefore fails as a whole once a newer term fenced the repository, and
// Merge returns a *FencedError: nothing of it lands.
//
// Fence itself returns a *FencedError when the repository is already
// fenced by a newer term, and succeeds again for the same term (a
// restarted leader still holding its term). A Clone that never calls
// Fence merges without regard to the fence: every merger of one target
// must fence, or none.
func (c *Clone) Fence(ctx context.Context, term int64) error {
	if term <= 0 {
		return fmt.Errorf("%w: fence term %d must be positive", ErrInvalidConfig, term)
	}
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		tip, held, err := c.remoteFence(ctx)
		if err != nil {
			return err
		}
		switch {
		case held > term:
			return &FencedError{Term: term, Newer: held}
		case held == term:
			c.fenceTip, c.fenceTerm = tip, term
			return nil
		}
		next, err := c.fenceCommit(ctx, tip, term, fmt.Sprintf("Foreman leader term %d", term))
		if err != nil {
			return err
		}
		_, perr := c.git.Run(ctx, c.cfg.Dir, "push", "--porcelain", "--force-with-lease="+FenceRef+":"+tip,
			remoteName, next+":"+FenceRef)
		if perr == nil {
			c.fenceTip, c.fenceTerm = next, term
			c.log.Info("gitremote: fenced the shared repository", "term", term, "previous", held)
			return nil
		}
		if ctx.Err() != nil {
			return perr
		}
		c.log.Info("gitremote: another leader fenced the shared repository first; reading it again", "term", term, "attempt", attempt)
	}
	return fmt.Errorf("%w: %s kept moving under %d attempts to fence it with term %d", ErrRemote, FenceRef, c.cfg.MaxAttempts, term)
}

// remoteFence reads the shared repository's fence: its commit and term
// ("" and 0 when it was never fenced). The commit is fetched so that the
// next fence commit can be made on it.
func (c *Clone) remoteFence(ctx context.Context) (string, int64, error) {
	out, err := c.git.Run(ctx, c.cfg.Dir, "ls-remote", remoteName, FenceRef)
	if err != nil {
		return "", 0, fmt.Errorf("%w: reading %s on %s: %w", ErrRemote, FenceRef, c.cfg.Remote, err)
	}
	f := strings.Fields(out)
	if len(f) == 0 {
		return "", 0, nil
	}
	tip := f[0]
	if _, err := c.git.Run(ctx, c.cfg.Dir, "fetch", "-q", "--no-tags", remoteName, "+"+FenceRef+":"+FenceRef); err != nil {
		return "", 0, fmt.Errorf("%w: fetching %s from %s: %w", ErrRemote, FenceRef, c.cfg.Remote, err)
	}
	body, err := c.git.Run(ctx, c.cfg.Dir, "cat-file", "commit", tip)
	if err != nil {
		return "", 0, fmt.Errorf("%w: reading %s (%s): %w", ErrRemote, FenceRef, tip, err)
	}
	term, ok := parseFenceTerm(body)
	if !ok {
		return "", 0, fmt.Errorf("%w: %s (%s) on %s is not a fence commit", ErrRemote, FenceRef, tip, c.cfg.Remote)
	}
	return tip, term, nil
}

// parseFenceTerm reads the term trailer of a fence commit's raw text.
func parseFenceTerm(commit string) (int64, bool) {
	for _, line := range strings.Split(commit, "\n") {
		if v, ok := strings.CutPrefix(line, termTrailer); ok {
			term, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return term, err == nil && term > 0
		}
	}
	return 0, false
}

// fenceCommit makes a fence commit for term on parent ("" for the first).
func (c *Clone) fenceCommit(ctx context.Context, parent string, term int64, subject string) (string, error) {
	args := []string{"commit-tree", emptyTree, "-m", subject + "\n\n" + termTrailer + strconv.FormatInt(term, 10)}
	if parent != "" {
		args = append(args, "-p", parent)
	}
	out, err := c.git.Run(ctx, c.cfg.Dir, args...)
	if err != nil {
		return "", fmt.Errorf("gitremote: making a fence commit: %w", err)
	}
	return strings.TrimSpace(out), nil
}

// FencedError is a Fence or Merge refused because a leader with a newer
// term fenced the shared repository: this one has lost the lead and must
// stop merging. Nothing of the refused merge is on the remote.
type FencedError struct {
	Term  int64 // this Clone's term
	Newer int64 // the term the shared repository is fenced with (0 if unreadable)
}

func (e *FencedError) Error() string {
	if e.Newer == 0 {
		return fmt.Sprintf("gitremote: term %d no longer holds the shared repository's fence (%s moved)", e.Term, FenceRef)
	}
	return fmt.Sprintf("gitremote: term %d is fenced off: the shared repository is fenced by term %d", e.Term, e.Newer)
}

// Is makes a FencedError match ErrFenced.
func (e *FencedError) Is(target error) bool { return target == ErrFenced }

// checkFence, after a refused push, tells a fence that moved to a newer
// term (a new leader) from a target that moved (another merge). A fence
// still at this term but on another commit is this Clone's own, from a
// push whose answer was lost or another clone of this leader: it is
// adopted, and moved reports that the push may be tried again.
func (c *Clone) checkFence(ctx context.Context) (moved bool, err error) {
	tip, term, err := c.remoteFence(ctx)
	if err != nil {
		return false, err
	}
	if term == c.fenceTerm {
		moved, c.fenceTip = tip != c.fenceTip, tip
		return moved, nil
	}
	c.log.Info("gitremote: fenced off by a newer leader; not merging", "term", c.fenceTerm, "newer", term)
	return false, &FencedError{Term: c.fenceTerm, Newer: term}
}
