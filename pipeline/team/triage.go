package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Conflict triage: a story whose squash merge conflicts is not paused at
// once. Its branch is rebased onto the target in its worktree; a clean
// rebase is checked with the gate plan again and merged. A rebase that
// conflicts is aborted (the worktree is left as it was) and the story goes
// back to its builder, once, with the conflicting files and both sides in
// its memory; only a conflict after that waits for a person. What to do
// next is triageNext's (triagedecide.go); the rework count is kept in the
// story's triage record, so a host that crashes mid-triage neither reworks
// twice nor merges twice (merges are idempotent by their trailer).

// triageRecord is a story's conflict triage, kept in the store (kind
// team.triage, by story id).
type triageRecord struct {
	// Conflicts counts the merge attempts whose conflict the triage could
	// not clear; Rebases the rebases it tried.
	Conflicts int `json:"conflicts,omitempty"`
	Rebases   int `json:"rebases,omitempty"`
	// Reworks counts the times the story went back to its builder for a
	// conflict (at most maxConflictReworks).
	Reworks int `json:"reworks,omitempty"`
	// Files and Context are the last conflict's files and both sides
	// (bounded); Cause is "conflict" or "gates" (the rebased change failed
	// the gate plan).
	Files   []string `json:"files,omitempty"`
	Context string   `json:"context,omitempty"`
	Cause   string   `json:"cause,omitempty"`
	// Next is what the pause the triage ended with is for: stepRework
	// (the team gives the story back) or stepPause (a person decides).
	Next triageStep `json:"next,omitempty"`
	// ReworkFor is the key of the pause the last rework was granted for.
	ReworkFor string `json:"reworkFor,omitempty"`
	// Ungated is the head of a branch the triage rebased cleanly and has
	// not yet seen pass the gates: a host that crashed in between gates
	// it before it merges (the rebased branch no longer conflicts).
	Ungated string `json:"ungated,omitempty"`
}

const (
	causeConflict = "conflict"
	causeGates    = "gates"
)

// Bounds of the conflict context an agent is given: per file, in all, and
// how many files are shown.
const (
	maxContextPerFile = 2000
	maxContextTotal   = 8000
	maxContextFiles   = 8
)

// triageMerger is the pipeline's Merger: pipeline.Git's squash merge, with
// conflict triage when the squash conflicts.
type triageMerger struct {
	t   *Team
	git pipeline.Git
}

func (m triageMerger) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	var rec triageRecord
	if _, _, err := getJSON(ctx, m.t.db, kindTriage, string(r.Item), &rec); err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if rec.Ungated != "" {
		return m.t.triage(ctx, m.git, r, factRebaseClean, nil)
	}
	out, err := m.git.Merge(ctx, r)
	if err != nil || len(out.Conflict) == 0 {
		return out, err
	}
	return m.t.triage(ctx, m.git, r, factSquashConflict, out.Conflict)
}

// triageEnd is how a triage that could not merge ends.
type triageEnd struct {
	cause   string
	files   []string
	context string
	detail  string // one line for the escalation (gates)
}

// triage works a conflicting squash merge (or, after a restart, a clean
// rebase the gates have not passed yet: first) through triageNext's steps
// and returns the merge's outcome: merged, or the conflict (or the rebased
// change's gate failure) the flow pauses on, with what follows the pause
// (a rework or a person) recorded first.
func (t *Team) triage(ctx context.Context, git pipeline.Git, r pipeline.MergeRequest, first triageFact, files []string) (pipeline.MergeOutcome, error) {
	item := r.Item
	st, err := t.pipe.Get(ctx, item)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	var rec triageRecord
	if _, _, err := getJSON(ctx, t.db, kindTriage, string(item), &rec); err != nil {
		return pipeline.MergeOutcome{}, err
	}
	dir, err := t.mgr.Path(item)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	a := pipeline.AgentAssignment{Item: item, Stage: st.Stage, Worker: st.Worker, Assignment: st.Assignment}
	target := t.targetBranch()
	in := triageInput{Fact: first, Reworks: rec.Reworks, CanRework: reworkStage(t.cfg.Stages, st.Stage) >= 0}
	end := triageEnd{cause: causeConflict, files: files,
		context: fmt.Sprintf("The squash of your branch onto %s conflicts in %s, and %s kept moving while the team rebased it.", target, strings.Join(files, ", "), target)}
	for {
		switch step := triageNext(in); step {
		case stepRebase:
			t.triageEvent(EventConflict, a, "SQUASH", files, fmt.Sprintf("the squash onto %s conflicts in %s; rebasing the branch onto %s", target, strings.Join(files, ", "), target))
			in.Rebases++
			rb, err := t.rebaseOnto(ctx, item)
			if err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if rb.clean {
				in.Fact = factRebaseClean
				// Recorded even as the Run stops (a rebase git finished as
				// ctx ended stands): a rebased branch never merges ungated.
				if err := updateTriage(context.WithoutCancel(ctx), t, item, func(rec *triageRecord) bool { rec.Ungated = rb.head; return true }); err != nil {
					return pipeline.MergeOutcome{}, err
				}
				t.triageEvent(EventRebased, a, "CLEAN", nil, fmt.Sprintf("rebased onto %s (now %s); running the gates on the rebased change", target, short(rb.head)))
				continue
			}
			in.Fact = factRebaseConflict
			end = triageEnd{cause: causeConflict, files: union(files, rb.files), context: rb.context}
			t.triageEvent(EventConflict, a, "REBASE", end.files, fmt.Sprintf("rebasing onto %s conflicts in %s; the rebase was aborted", target, strings.Join(end.files, ", ")))
		case stepRegate:
			passed, feedback, err := t.regate(ctx, a, dir)
			if err != nil {
				return pipeline.MergeOutcome{}, err
			}
			// Gated: a merge after a restart need not gate it again (a
			// failure ends in a rework, whose build runs the gates).
			if err := updateTriage(ctx, t, item, func(rec *triageRecord) bool {
				changed := rec.Ungated != ""
				rec.Ungated = ""
				return changed
			}); err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if passed {
				in.Fact = factGatesPassed
				continue
			}
			in.Fact = factGatesFailed
			end = triageEnd{cause: causeGates, files: files, detail: feedback,
				context: fmt.Sprintf("Your branch was rebased onto %s cleanly, but the rebased change fails the gates:\n\n%s", target, clipBytes(feedback, maxContextTotal))}
		case stepMerge:
			out, err := git.Merge(ctx, r)
			if err != nil || len(out.Conflict) == 0 {
				return out, err
			}
			files = out.Conflict
			in.Fact = factSquashConflict
			end = triageEnd{cause: causeConflict, files: files,
				context: fmt.Sprintf("The squash of your branch onto %s conflicts in %s, and %s kept moving while the team rebased it.", target, strings.Join(files, ", "), target)}
		case stepRework, stepPause:
			if err := updateTriage(ctx, t, item, func(rec *triageRecord) bool {
				rec.Conflicts++
				rec.Rebases += in.Rebases
				rec.Files, rec.Context, rec.Cause, rec.Next = end.files, end.context, end.cause, step
				return true
			}); err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if end.cause == causeGates {
				return pipeline.MergeOutcome{Refused: fmt.Sprintf("rebased onto %s, the change fails the gates: %s", target, oneLine(end.detail, maxDetail))}, nil
			}
			return pipeline.MergeOutcome{Conflict: end.files}, nil
		default:
			return pipeline.MergeOutcome{}, fmt.Errorf("team: conflict triage of %s: no step after %s", item, in.Fact)
		}
	}
}

func (t *Team) triageEvent(kind EventKind, a pipeline.AgentAssignment, outcome pipeline.Outcome, files []string, detail string) {
	t.events.add(Event{Kind: kind, At: t.clk.Now(), Story: a.Item, Stage: a.Stage, Role: t.role(a.Stage),
		Assignment: a.Assignment, Outcome: outcome, Files: slices.Clone(files), Detail: detail})
}

// updateTriage changes a story's triage record (read-modify-write at its
// version, redone on a conflict); change returns false to write nothing.
func updateTriage(ctx context.Context, t *Team, item foreman.ItemID, change func(*triageRecord) bool) error {
	for range 5 {
		var rec triageRecord
		ver, _, err := getJSON(ctx, t.db, kindTriage, string(item), &rec)
		if err != nil {
			return err
		}
		if !change(&rec) {
			return nil
		}
		data, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		_, err = t.db.Apply(ctx, store.Op{Kind: kindTriage, ID: string(item), ExpectVersion: ver, Data: data})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("team: updating the conflict triage of %s: too many conflicts", item)
}

// regate runs the gate plan on the rebased change in the worktree (the
// quality gates when they are set, else the gates), as the quality-gate
// stage does; feedback says what failed.
func (t *Team) regate(ctx context.Context, a pipeline.AgentAssignment, dir string) (bool, string, error) {
	plan := t.cfg.QualityGates
	if checkCount(plan) == 0 {
		plan = t.cfg.Gates
	}
	if checkCount(plan) == 0 {
		return true, "", nil
	}
	snap := phases.Snapshot{ID: string(a.Item), RunID: phases.RunID(a.Assignment), WorkspacePath: dir}
	rep, err := gateEvents{t: t, a: a}.Verify(ctx, snap, plan, phases.VerifyOptions{})
	if err != nil || rep.Passed {
		return rep.Passed, "", err
	}
	fb, ferr := t.feedback.Generate(ctx, snap, rep, plan, phases.FeedbackOptions{})
	if ferr != nil || fb == "" {
		fb = failureSummary(rep)
	}
	return false, fb, nil
}

// reworkDue is the coordinator's first look at a paused story: a pause
// that conflict triage gives back to the builder (conflictReworkDue) is
// not the graph's to park; the stage to rework at is returned.
func (t *Team) reworkDue(ctx context.Context, st pipeline.State) (int, bool) {
	if st.Status != pipeline.StatusPaused || st.Pause == nil ||
		(st.Pause.Reason != pipeline.ReasonMergeConflict && st.Pause.Reason != pipeline.ReasonMergeFailed) {
		return 0, false
	}
	var rec triageRecord
	if _, _, err := getJSON(ctx, t.db, kindTriage, string(st.Item), &rec); err != nil {
		t.log.Warn("team: reading a story's conflict triage", "story", st.Item, "err", err)
		return 0, false
	}
	stage := reworkStage(t.cfg.Stages, st.Stage)
	if stage < 0 || !conflictReworkDue(st, rec) {
		return 0, false
	}
	return stage, true
}

// grantRework gives a conflicting story back to its builder: the grant is
// recorded first (for this pause, so a restart finishes this rework and
// never starts a second), the conflict goes into the story's memory (the
// builder's prompt shows it), and the note for the builder is returned
// (the coordinator resumes the flow at the build stage with it).
func (t *Team) grantRework(ctx context.Context, st pipeline.State, stage int) (string, error) {
	key := st.Pause.Key
	var rec triageRecord
	fresh := false
	err := updateTriage(ctx, t, st.Item, func(r *triageRecord) bool {
		if r.ReworkFor == key {
			rec = *r
			return false
		}
		r.Reworks++
		r.ReworkFor, r.Next = key, stepNone
		rec, fresh = *r, true
		return true
	})
	if err != nil {
		return "", err
	}
	if err := updateMemory(ctx, t.db, st.Item, func(m *memory) { m.Conflict = rec.Context }); err != nil {
		return "", err
	}
	target := t.targetBranch()
	note := fmt.Sprintf("Your work no longer merges onto %s: rebasing it conflicts in %s (the merge conflict is shown below). "+
		"Rebase your branch onto %s (git rebase %s), resolve the conflicts keeping what both sides meant, make sure the checks pass, and commit.",
		target, strings.Join(rec.Files, ", "), target, target)
	if rec.Cause == causeGates {
		note = fmt.Sprintf("Your branch was rebased onto %s, and the rebased change fails the gates (shown below). Fix it on the rebased branch and commit.", target)
	}
	if fresh {
		t.events.add(Event{Kind: EventConflictRework, At: t.clk.Now(), Story: st.Item, Stage: stage, Role: t.role(stage),
			Files: slices.Clone(rec.Files), Detail: fmt.Sprintf("back to the builder (rework %d of %d) with the conflict in %s, both sides, in its memory",
				rec.Reworks, maxConflictReworks, strings.Join(rec.Files, ", "))})
	}
	return note, nil
}

// ConflictTriage is what conflict triage did about a story's merge
// conflicts: how often it rebased the story's branch onto Target, how
// often it gave the story back to its agent, and the last conflict's
// files and cause ("conflict", or "gates": the rebased change failed the
// gate plan).
type ConflictTriage struct {
	Target  string   `json:"target"`
	Rebases int      `json:"rebases"`
	Reworks int      `json:"reworks"`
	Files   []string `json:"files,omitempty"`
	Cause   string   `json:"cause,omitempty"`
}

// String says it in a line: "rebased onto main 2 times, given back to its
// agent once".
func (c ConflictTriage) String() string {
	times := func(n int) string {
		if n == 1 {
			return "once"
		}
		return fmt.Sprintf("%d times", n)
	}
	s := fmt.Sprintf("rebased onto %s %s", c.Target, times(c.Rebases))
	if c.Reworks > 0 {
		s += ", given back to its agent " + times(c.Reworks)
	}
	if c.Cause == causeGates {
		s += "; the rebased change fails the gates"
	}
	return s
}

// conflictTriage reads a story's triage, nil when its merge never
// conflicted.
func (t *Team) conflictTriage(ctx context.Context, item foreman.ItemID) (*ConflictTriage, error) {
	var rec triageRecord
	_, found, err := getJSON(ctx, t.db, kindTriage, string(item), &rec)
	if err != nil || !found {
		return nil, err
	}
	return &ConflictTriage{Target: t.targetBranch(), Rebases: rec.Rebases, Reworks: rec.Reworks, Files: rec.Files, Cause: rec.Cause}, nil
}

// targetBranch names the branch stories merge onto, also for ReadStatus,
// which has no repository manager.
func (t *Team) targetBranch() string {
	if t.mgr != nil {
		return t.mgr.Target()
	}
	for _, b := range []string{t.cfg.Merge.TargetBranch, t.cfg.Merge.BaseBranch} {
		if b != "" {
			return b
		}
	}
	return "main"
}

func triageOf(stories []StoryStatus, id foreman.ItemID) *ConflictTriage {
	for _, s := range stories {
		if s.ID == id {
			return s.Triage
		}
	}
	return nil
}
