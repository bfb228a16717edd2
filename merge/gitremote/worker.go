package gitremote

import (
	"context"
	"fmt"
	"os"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
)

// Checkout makes this host's worktree of id start from the shared
// repository: the local base branch is set to the remote's, and the
// worktree is on the item's branch as the remote has it (work an earlier
// stage pushed, from this host or another), or on a new branch from the
// base when the remote has none. A worktree already at that commit is
// kept; any other is made again (work that was never pushed is not part
// of the item). Push later pushes only on top of what Checkout saw.
func (c *Clone) Checkout(ctx context.Context, id foreman.ItemID) (merge.Worktree, error) {
	path, err := c.mgr.Path(id)
	if err != nil {
		return merge.Worktree{}, err
	}
	branch := c.branch(id)
	tip, err := c.remoteTip(ctx, branch)
	if err != nil {
		return merge.Worktree{}, err
	}
	fetch := []string{"+refs/heads/" + c.base + ":refs/heads/" + c.base}
	if tip != "" {
		fetch = append(fetch, "+refs/heads/"+branch+":refs/remotes/"+remoteName+"/"+branch)
	}
	if _, err := c.git.Run(ctx, c.cfg.Dir, append([]string{"fetch", "-q", "--no-tags", remoteName}, fetch...)...); err != nil {
		return merge.Worktree{}, fmt.Errorf("%w: fetching %s: %w", ErrRemote, id, err)
	}
	want := tip
	if want == "" {
		if want, err = c.localTip(ctx, c.cfg.Dir, "refs/heads/"+c.base); err != nil {
			return merge.Worktree{}, err
		}
	}
	keep := false
	if _, err := os.Stat(path); err == nil {
		head, _ := c.localTip(ctx, path, "HEAD")
		keep = head == want
		if !keep {
			if err := c.mgr.Remove(ctx, id); err != nil {
				return merge.Worktree{}, err
			}
		}
	}
	if !keep {
		ref := "refs/heads/" + branch
		args := []string{"update-ref", "-d", ref}
		if tip != "" {
			args = []string{"update-ref", ref, tip}
		}
		if _, err := c.git.Run(ctx, c.cfg.Dir, args...); err != nil {
			return merge.Worktree{}, err
		}
	}
	wt, err := c.mgr.Create(ctx, id)
	if err != nil {
		return wt, err
	}
	c.mu.Lock()
	c.leases[id] = tip
	c.mu.Unlock()
	return wt, nil
}

// Push commits what the worktree of id has uncommitted (with message) and
// pushes the item's branch to the shared repository, on condition that the
// remote's branch is still where Checkout (or the last Push) found it; else
// it returns *BranchMovedError and pushes nothing. It returns the pushed
// head.
func (c *Clone) Push(ctx context.Context, id foreman.ItemID, message string) (string, error) {
	path, err := c.mgr.Path(id)
	if err != nil {
		return "", err
	}
	c.mu.Lock()
	lease, ok := c.leases[id]
	c.mu.Unlock()
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrNotCheckedOut, id)
	}
	status, err := c.git.Run(ctx, path, "--no-optional-locks", "status", "--porcelain")
	if err != nil {
		return "", err
	}
	if strings.TrimSpace(status) != "" {
		if strings.TrimSpace(message) == "" {
			message = string(id) + ": uncommitted work"
		}
		if _, err := c.git.Run(ctx, path, "add", "-A"); err != nil {
			return "", err
		}
		if _, err := c.git.Run(ctx, path, "commit", "-q", "--no-verify", "-m", message); err != nil {
			return "", err
		}
	}
	branch := c.branch(id)
	head, err := c.localTip(ctx, c.cfg.Dir, "refs/heads/"+branch)
	if err != nil {
		return "", err
	}
	if head == lease {
		return head, nil
	}
	ref := "refs/heads/" + branch
	_, perr := c.git.Run(ctx, c.cfg.Dir, "push", "-q", "--force-with-lease="+ref+":"+lease, remoteName, ref+":"+ref)
	if perr != nil {
		got, err := c.remoteTip(ctx, branch)
		if err != nil {
			return "", err
		}
		if got != lease {
			return "", &BranchMovedError{Item: id, Branch: branch, Want: lease, Got: got}
		}
		return "", fmt.Errorf("%w: pushing %s: %w", ErrRemote, branch, perr)
	}
	c.log.Info("gitremote: pushed", "item", id, "branch", branch, "head", head)
	c.mu.Lock()
	c.leases[id] = head
	c.mu.Unlock()
	return head, nil
}

// Remove deletes this host's worktree of id (the remote's branch stays).
func (c *Clone) Remove(ctx context.Context, id foreman.ItemID) error {
	c.mu.Lock()
	delete(c.leases, id)
	c.mu.Unlock()
	return c.mgr.Remove(ctx, id)
}
