package teamsim

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// simRepo is the simulated repository: a main branch of squash commits,
// each carrying its story's trailer, and a worktree (with its branch) per
// story. A story's merge conflicts when Config.Seed says so and another story
// merged since its worktree was made; like merge.Manager, a merge first
// looks for its own trailer on main and then reports the commit it finds.
type simRepo struct {
	w         *world
	main      []commit
	worktrees map[foreman.ItemID]int // the main length the worktree started from
}

type commit struct {
	id      string
	trailer foreman.ItemID
}

func newSimRepo(w *world) *simRepo {
	return &simRepo{w: w, worktrees: map[foreman.ItemID]int{}}
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

func (r *simRepo) CreateWorktree(_ context.Context, item foreman.ItemID) error {
	r.w.crashPoint("create worktree " + string(item))
	if _, ok := r.worktrees[item]; !ok {
		r.worktrees[item] = len(r.main)
	}
	return nil
}

func (r *simRepo) RemoveWorktree(_ context.Context, item foreman.ItemID) error {
	r.w.crashPoint("remove worktree " + string(item))
	delete(r.worktrees, item)
	return nil
}

func (r *simRepo) Merge(_ context.Context, req pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	r.w.crashPoint("before merge " + string(req.Item))
	if c := r.merged(req.Item); len(c) > 0 {
		return pipeline.MergeOutcome{Commit: c[0].id, Already: true}, nil
	}
	base, ok := r.worktrees[req.Item]
	if !ok {
		return pipeline.MergeOutcome{Refused: "no worktree for " + string(req.Item)}, nil
	}
	if st := r.w.stories[req.Item]; st != nil && st.conflicts && base < len(r.main) {
		st.conflicts = false // a person rebases it when resolving
		return pipeline.MergeOutcome{Conflict: []string{"shared/" + string(req.Item) + ".go"}}, nil
	}
	c := commit{id: fmt.Sprintf("c%d", len(r.main)+1), trailer: req.Item}
	r.main = append(r.main, c)
	r.w.tracef("merged %s as %s", req.Item, c.id)
	r.w.crashPoint("after merge " + string(req.Item))
	return pipeline.MergeOutcome{Commit: c.id}, nil
}
