package teamsim

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
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
//   - It is the git of the team's conflict triage (teamcore.TriageGit):
//     a rebase onto main conflicts when the merge would (and then leaves
//     the branch where it was, as merge.Manager's aborted rebase does),
//     else the branch starts at main's tip; the gates on a rebased change
//     fail as often as Faults.QualityFail says.
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
	if r.conflicts(req.Item, base) {
		r.branches[req.Item] = len(r.main) // rebased by whoever resolves it
		return pipeline.MergeOutcome{Conflict: []string{conflictFile}}, nil
	}
	c := commit{id: fmt.Sprintf("c%d", len(r.main)+1), trailer: req.Item}
	r.main = append(r.main, c)
	r.w.tracef("merged %s as %s", req.Item, c.id)
	r.w.crashPoint("after merge " + string(req.Item))
	return pipeline.MergeOutcome{Commit: c.id}, nil
}

// conflicts reports whether item's branch, started at base, conflicts with
// main: it changes conflictFile, and so did a story that landed since.
func (r *simRepo) conflicts(item foreman.ItemID, base int) bool {
	if !r.marked(item) {
		return false
	}
	for _, c := range r.main[base:] {
		if r.marked(c.trailer) {
			return true
		}
	}
	return false
}

// Target implements teamcore.TriageGit.
func (r *simRepo) Target() string { return "main" }

// Rebase implements teamcore.TriageGit.
func (r *simRepo) Rebase(_ context.Context, item foreman.ItemID) (teamcore.Rebased, error) {
	r.w.crashPoint("rebase " + string(item))
	base, ok := r.branches[item]
	if !ok || !r.worktrees[item] {
		return teamcore.Rebased{Context: "no worktree for " + string(item)}, nil
	}
	if r.conflicts(item, base) {
		return teamcore.Rebased{Files: []string{conflictFile}, Context: "both sides of " + conflictFile}, nil
	}
	r.branches[item] = len(r.main)
	r.w.tracef("rebased %s onto c%d", item, len(r.main))
	return teamcore.Rebased{Clean: true, Head: fmt.Sprintf("%s-on-c%d", item, len(r.main))}, nil
}

// Regate implements teamcore.TriageGit.
func (r *simRepo) Regate(_ context.Context, a pipeline.AgentAssignment) (bool, string, error) {
	r.w.crashPoint("regate " + string(a.Item))
	if r.w.rng.Float64() < r.w.cfg.Faults.QualityFail {
		return false, "go test ./... failed", nil
	}
	return true, "", nil
}

// Saw implements teamcore.TriageGit.
func (r *simRepo) Saw(a pipeline.AgentAssignment, fact teamcore.TriageFact, files []string, _ string) {
	r.w.tracef("triage %s: %s %v", a.Item, fact, files)
}
