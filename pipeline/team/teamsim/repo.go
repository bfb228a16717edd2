package teamsim

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// conflictFile is the one file every story marked to conflict
// (story.conflicts) changes.
const conflictFile = "shared.go"

// simRepo is the simulated repository, a model of merge.Manager behind
// pipeline.Git that repo_model_test.go checks against the real one on the
// same operations: a main branch of squash commits, each carrying its
// story's trailer, and per story a branch and a worktree.
//
//   - A story's branch starts at main's tip when its worktree is first
//     made, and outlives the worktree (merge.Manager keeps it unless
//     Config.DeleteBranchOnRemove): making the worktree again, after a
//     pause removed it, finds the same branch.
//   - A merge first looks for the story's trailer on main and reports the
//     commit it finds (Already); a story without a branch is refused.
//   - The stories Config.Seed marks (story.conflicts) all change one file,
//     the others only files of their own: a marked story's merge conflicts
//     when another marked story landed since its branch started, as git's
//     three-way merge does. A conflict is then rebased at once (by the
//     person or builder the pipeline hands it to): the branch starts again
//     at main's tip.
type simRepo struct {
	w    *world
	main []commit
	// branches: the main length each story's branch starts from.
	branches map[foreman.ItemID]int
	// worktrees: the stories whose worktree exists.
	worktrees map[foreman.ItemID]bool
}

type commit struct {
	id      string
	trailer foreman.ItemID
}

func newSimRepo(w *world) *simRepo {
	return &simRepo{w: w, branches: map[foreman.ItemID]int{}, worktrees: map[foreman.ItemID]bool{}}
}

// merged returns the commits on main whose trailer names item.
func (r *simRepo) merged(item foreman.ItemID) []commit {
	var out []commit
	for _, c := range r.main {
		if c.trailer == item {
			out = append(out, c)
		}
	}
	return out
}

// marked reports whether item changes conflictFile.
func (r *simRepo) marked(item foreman.ItemID) bool {
	st := r.w.stories[item]
	return st != nil && st.conflicts
}

func (r *simRepo) CreateWorktree(_ context.Context, item foreman.ItemID) error {
	r.w.crashPoint("create worktree " + string(item))
	if _, ok := r.branches[item]; !ok {
		r.branches[item] = len(r.main)
	}
	r.worktrees[item] = true
	return nil
}

func (r *simRepo) RemoveWorktree(_ context.Context, item foreman.ItemID) error {
	r.w.crashPoint("remove worktree " + string(item))
	delete(r.worktrees, item)
	return nil
}

func (r *simRepo) Merge(_ context.Context, req pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	r.w.crashPoint("before merge " + string(req.Item))
	base, ok := r.branches[req.Item]
	if !ok {
		return pipeline.MergeOutcome{Refused: "no branch for " + string(req.Item)}, nil
	}
	if c := r.merged(req.Item); len(c) > 0 {
		return pipeline.MergeOutcome{Commit: c[0].id, Already: true}, nil
	}
	if r.marked(req.Item) {
		for _, c := range r.main[base:] {
			if r.marked(c.trailer) {
				r.branches[req.Item] = len(r.main) // rebased by whoever resolves it
				return pipeline.MergeOutcome{Conflict: []string{conflictFile}}, nil
			}
		}
	}
	c := commit{id: fmt.Sprintf("c%d", len(r.main)+1), trailer: req.Item}
	r.main = append(r.main, c)
	r.w.tracef("merged %s as %s", req.Item, c.id)
	r.w.crashPoint("after merge " + string(req.Item))
	return pipeline.MergeOutcome{Commit: c.id}, nil
}
