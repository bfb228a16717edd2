package gitremote

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
)

// Merge lands the item's branch, as the shared repository has it, on the
// remote's target: it fetches both, squash-merges with the item's trailer
// and verifies locally (merge.Manager.Merge, with req's Check), then pushes
// the target on condition that the remote's target is still the tip the
// squash was made on (git push --force-with-lease=<target>:<old tip>). So
// two mergers, in any processes on any hosts, never both land: the one
// that loses fetches again, finds the item's trailer on the new tip and
// returns AlreadyMerged, or squashes onto the new tip and tries again, up
// to Config.MaxAttempts (then *RaceError). req.Push is ignored: the result
// is always pushed (Result.Pushed).
//
// Errors: merge's (ErrNothingToMerge, *ConflictError, *CheckError, ...),
// merge.ErrNoBranch when the remote has no branch for the item,
// *RaceError, *merge.PushError when the push failed for another reason
// than a moved target, *FencedError when this Clone was fenced (Fence) and
// a newer leader has fenced the remote since, and ErrRemote when the
// remote cannot be read.
func (c *Clone) Merge(ctx context.Context, id foreman.ItemID, req merge.Request) (merge.Result, error) {
	if err := id.Validate(); err != nil {
		return merge.Result{}, err
	}
	c.mergeMu.Lock()
	defer c.mergeMu.Unlock()
	req.Push = false
	branch := c.branch(id)
	for attempt := 1; attempt <= c.cfg.MaxAttempts; attempt++ {
		tip, err := c.remoteTip(ctx, branch)
		if err != nil {
			return merge.Result{}, err
		}
		if tip == "" {
			return merge.Result{}, fmt.Errorf("%w: %s on %s", merge.ErrNoBranch, branch, c.cfg.Remote)
		}
		// The local target becomes the remote's, dropping a squash an
		// earlier attempt (or a crashed process) made but never pushed.
		if err := c.fetch(ctx, c.target, branch); err != nil {
			return merge.Result{}, err
		}
		res, err := c.mgr.Merge(ctx, id, req)
		if err != nil {
			return res, err
		}
		if res.Status == merge.AlreadyMerged {
			res.Pushed = true // found on the remote's tip, just fetched
			return res, nil
		}
		ref := "refs/heads/" + c.target
		args := []string{"push", "--porcelain", "--force-with-lease=" + ref + ":" + res.Previous}
		refspecs := []string{res.Commit + ":" + ref}
		var nextFence string
		if c.fenceTip != "" {
			// The fence moves with every merge, so that the remote checks it
			// under the same lock as the target (an unchanged ref is never
			// sent, hence never checked).
			if nextFence, err = c.fenceCommit(ctx, c.fenceTip, c.fenceTerm, fmt.Sprintf("Foreman leader term %d: %s", c.fenceTerm, id)); err != nil {
				return merge.Result{}, err
			}
			args = append(args, "--atomic", "--force-with-lease="+FenceRef+":"+c.fenceTip)
			refspecs = append(refspecs, nextFence+":"+FenceRef)
		}
		out, perr := c.git.Run(ctx, c.cfg.Dir, append(append(args, remoteName), refspecs...)...)
		if perr == nil {
			res.Pushed = true
			if nextFence != "" {
				c.fenceTip = nextFence
			}
			if upToDate(out, ref) {
				// Another merger squashed the same change onto the same
				// tip in the same second: the identical commit is already
				// the target, and git pushes nothing (nor checks the lease).
				res.Status = merge.AlreadyMerged
				return res, nil
			}
			c.log.Info("gitremote: landed", "item", id, "target", c.target, "commit", res.Commit, "attempt", attempt)
			return res, nil
		}
		if errors.Is(perr, context.Canceled) || errors.Is(perr, context.DeadlineExceeded) || ctx.Err() != nil {
			return merge.Result{}, perr
		}
		if c.fenceTip != "" {
			moved, err := c.checkFence(ctx)
			if err != nil {
				return merge.Result{}, err
			}
			if moved {
				continue
			}
		}
		got, err := c.remoteTip(ctx, c.target)
		if err != nil {
			return merge.Result{}, err
		}
		if got == res.Previous {
			return res, &merge.PushError{Remote: c.cfg.Remote, Ref: ref, Want: res.Commit, Got: got, Err: perr}
		}
		c.log.Info("gitremote: lost the race for the target; fetching again", "item", id, "target", c.target, "remote", got, "attempt", attempt)
	}
	return merge.Result{}, &RaceError{Item: id, Target: c.target, Attempts: c.cfg.MaxAttempts}
}

// upToDate reports whether git push --porcelain's output says ref was
// already what was pushed (the "=" flag).
func upToDate(porcelain, ref string) bool {
	for _, l := range strings.Split(porcelain, "\n") {
		if f := strings.Split(l, "\t"); len(f) >= 2 && f[0] == "=" && strings.HasSuffix(f[1], ":"+ref) {
			return true
		}
	}
	return false
}
