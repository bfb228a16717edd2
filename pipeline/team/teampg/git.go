package teampg

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/merge/gitremote"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/pgstore"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Git is the leader's team.Config.Worktrees and team.Config.Merger: the
// hosts make their worktrees (so creating and removing one here does
// nothing) and the merge lands what they pushed on the shared repository.
type Git struct {
	Clone *gitremote.Clone
	// Leader, when set, fences each merge: just before it, a record is
	// written through Leader.Store(), which fails (pgstore.ErrFenced) once
	// another coordinator holds the lease, and then nothing is merged. A
	// leader paused between that write and its push is stopped by the
	// Clone's fence (gitremote.Clone.Fence, which Lead calls with the
	// lease's term): its push fails with *gitremote.FencedError.
	Leader *pgstore.Leader
	// Request is every merge's template (Check, Body); Title comes from
	// the story.
	Request merge.Request
}

// CreateWorktree does nothing: the host that performs a stage checks the
// story out in its own clone.
func (Git) CreateWorktree(context.Context, foreman.ItemID) error { return nil }

// RemoveWorktree does nothing: hosts own their worktrees.
func (Git) RemoveWorktree(context.Context, foreman.ItemID) error { return nil }

// Merge implements pipeline.Merger over gitremote.Clone.Merge. Refusals a
// person must act on (conflict, nothing to merge, no branch, a failed
// check) are outcomes; a lost race, a failed push and the loss of the lease
// are errors (the effect stays pending; whoever leads retries it).
func (g Git) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	if g.Leader != nil {
		if err := fence(ctx, g.Leader.Store(), r.Item); err != nil {
			return pipeline.MergeOutcome{}, fmt.Errorf("teampg: not merging %s: %w", r.Item, err)
		}
	}
	req := g.Request
	if r.Title != "" {
		req.Title = r.Title
	}
	res, err := g.Clone.Merge(ctx, r.Item, req)
	var (
		conflict *merge.ConflictError
		dirty    *merge.DirtyError
		check    *merge.CheckError
		verify   *merge.VerifyError
	)
	switch {
	case err == nil:
		return pipeline.MergeOutcome{Commit: res.Commit, Already: res.Status == merge.AlreadyMerged}, nil
	case errors.As(err, &conflict):
		return pipeline.MergeOutcome{Conflict: conflict.Files}, nil
	case errors.Is(err, merge.ErrNothingToMerge), errors.Is(err, merge.ErrNoBranch), errors.Is(err, merge.ErrProtectedPath), errors.Is(err, merge.ErrLinkOutside),
		errors.As(err, &dirty), errors.As(err, &check), errors.As(err, &verify):
		return pipeline.MergeOutcome{Refused: err.Error()}, nil
	}
	return pipeline.MergeOutcome{}, err
}

// fenceKind records each story's last merge attempt; writing it is the
// lease check.
const fenceKind = "team.merge-fence"

func fence(ctx context.Context, db store.Store, item foreman.ItemID) error {
	var version int64
	rec, err := db.Get(ctx, fenceKind, string(item))
	switch {
	case err == nil:
		version = rec.Version
	case !errors.Is(err, store.ErrNotFound):
		return err
	}
	_, err = db.Apply(ctx, store.Op{Kind: fenceKind, ID: string(item), ExpectVersion: version, Data: []byte("merging")})
	return err
}
