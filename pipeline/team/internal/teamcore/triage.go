package teamcore

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// Conflict triage: a story whose squash merge conflicts is not paused at
// once. Its branch is rebased onto the target in its worktree; a clean
// rebase is checked with the gate plan again and merged. A rebase that
// conflicts is aborted (the worktree is left as it was) and the story goes
// back to its builder, once, with the conflicting files and both sides in
// its memory; only a conflict after that waits for a person. What to do
// next is TriageNext's (triagedecide.go); the rework count is kept in the
// story's triage record, so a host that crashes mid-triage neither reworks
// twice nor merges twice (merges are idempotent by their trailer).

// KindTriage is the store kind of the stories' triage records.
const KindTriage = "team.triage"

// TriageRecord is a story's conflict triage, kept in the store (kind
// KindTriage, by story id).
type TriageRecord struct {
	// Conflicts counts the merge attempts whose conflict the triage could
	// not clear; Rebases the rebases it tried.
	Conflicts int `json:"conflicts,omitempty"`
	Rebases   int `json:"rebases,omitempty"`
	// Reworks counts the times the story went back to its builder for a
	// conflict (at most MaxConflictReworks).
	Reworks int `json:"reworks,omitempty"`
	// Files and Context are the last conflict's files and both sides
	// (bounded); Cause is CauseConflict or CauseGates (the rebased change
	// failed the gate plan).
	Files   []string `json:"files,omitempty"`
	Context string   `json:"context,omitempty"`
	Cause   string   `json:"cause,omitempty"`
	// Next is what the pause the triage ended with is for: StepRework
	// (the team gives the story back) or StepPause (a person decides).
	Next TriageStep `json:"next,omitempty"`
	// ReworkFor is the key of the pause the last rework was granted for.
	ReworkFor string `json:"reworkFor,omitempty"`
	// Ungated is the head of a branch the triage rebased cleanly and has
	// not yet seen pass the gates: a host that crashed in between gates
	// it before it merges (the rebased branch no longer conflicts).
	Ungated string `json:"ungated,omitempty"`
}

// The causes of a triage that could not merge.
const (
	CauseConflict = "conflict"
	CauseGates    = "gates"
)

// Rebased is a rebase's outcome: clean (the branch now at Head), or not
// (the rebase aborted, or never started) with the files and what the
// builder is told in Context.
type Rebased struct {
	Clean   bool
	Head    string
	Files   []string
	Context string
}

// TriageGit is the git work of conflict triage: the team's merge.Manager
// in the story's worktree and its gate plan, or the simulator's
// repository model.
type TriageGit interface {
	// Target names the branch stories merge onto.
	Target() string
	// Merge squash-merges the story (pipeline.Git's merge).
	Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error)
	// Rebase rebases the story's branch onto the target in its worktree.
	Rebase(ctx context.Context, item foreman.ItemID) (Rebased, error)
	// Regate runs the gate plan on the rebased change; feedback says
	// what failed.
	Regate(ctx context.Context, a pipeline.AgentAssignment) (passed bool, feedback string, err error)
	// Saw is told what the triage found (FactSquashConflict,
	// FactRebaseClean, FactRebaseConflict), with a line for people.
	Saw(a pipeline.AgentAssignment, fact TriageFact, files []string, detail string)
}

// Triager is the pipeline's Merger: the squash merge, with conflict
// triage when the squash conflicts.
type Triager struct {
	DB   store.Store
	Flow interface {
		Get(ctx context.Context, item foreman.ItemID) (pipeline.State, error)
	}
	Git TriageGit
	// ReworkStage is the build stage a story paused at a stage goes back
	// to, or -1 when the flow has none.
	ReworkStage func(paused int) int
	// MaxDetail bounds the gate failure a refused merge carries.
	MaxDetail int
	// ContextLimit bounds the gate feedback in a triage's context.
	ContextLimit int
}

// Merge implements pipeline.Merger.
func (m Triager) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	var rec TriageRecord
	if _, err := GetRecord(ctx, m.DB, KindTriage, string(r.Item), &rec); err != nil {
		return pipeline.MergeOutcome{}, err
	}
	if rec.Ungated != "" {
		return m.triage(ctx, r, FactRebaseClean, nil)
	}
	out, err := m.Git.Merge(ctx, r)
	if err != nil || len(out.Conflict) == 0 {
		return out, err
	}
	return m.triage(ctx, r, FactSquashConflict, out.Conflict)
}

// triageEnd is how a triage that could not merge ends.
type triageEnd struct {
	cause   string
	files   []string
	context string
	detail  string // one line for the escalation (gates)
}

// triage works a conflicting squash merge (or, after a restart, a clean
// rebase the gates have not passed yet: first) through TriageNext's steps
// and returns the merge's outcome: merged, or the conflict (or the rebased
// change's gate failure) the flow pauses on, with what follows the pause
// (a rework or a person) recorded first.
func (m Triager) triage(ctx context.Context, r pipeline.MergeRequest, first TriageFact, files []string) (pipeline.MergeOutcome, error) {
	item := r.Item
	st, err := m.Flow.Get(ctx, item)
	if err != nil {
		return pipeline.MergeOutcome{}, err
	}
	var rec TriageRecord
	if _, err := GetRecord(ctx, m.DB, KindTriage, string(item), &rec); err != nil {
		return pipeline.MergeOutcome{}, err
	}
	a := pipeline.AgentAssignment{Item: item, Stage: st.Stage, Worker: st.Worker, Assignment: st.Assignment}
	target := m.Git.Target()
	in := TriageInput{Fact: first, Reworks: rec.Reworks, CanRework: m.ReworkStage(st.Stage) >= 0}
	squashEnd := func(files []string) triageEnd {
		return triageEnd{cause: CauseConflict, files: files,
			context: fmt.Sprintf("The squash of your branch onto %s conflicts in %s, and %s kept moving while the team rebased it.", target, strings.Join(files, ", "), target)}
	}
	end := squashEnd(files)
	for {
		switch step := TriageNext(in); step {
		case StepRebase:
			m.Git.Saw(a, FactSquashConflict, files, fmt.Sprintf("the squash onto %s conflicts in %s; rebasing the branch onto %s", target, strings.Join(files, ", "), target))
			in.Rebases++
			rb, err := m.Git.Rebase(ctx, item)
			if err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if rb.Clean {
				in.Fact = FactRebaseClean
				// Recorded even as the Run stops (a rebase git finished as
				// ctx ended stands): a rebased branch never merges ungated.
				if err := UpdateTriage(context.WithoutCancel(ctx), m.DB, item, func(rec *TriageRecord) bool { rec.Ungated = rb.Head; return true }); err != nil {
					return pipeline.MergeOutcome{}, err
				}
				m.Git.Saw(a, FactRebaseClean, nil, fmt.Sprintf("rebased onto %s (now %s); running the gates on the rebased change", target, shortCommit(rb.Head)))
				continue
			}
			in.Fact = FactRebaseConflict
			end = triageEnd{cause: CauseConflict, files: union(files, rb.Files), context: rb.Context}
			m.Git.Saw(a, FactRebaseConflict, end.files, fmt.Sprintf("rebasing onto %s conflicts in %s; the rebase was aborted", target, strings.Join(end.files, ", ")))
		case StepRegate:
			passed, feedback, err := m.Git.Regate(ctx, a)
			if err != nil {
				return pipeline.MergeOutcome{}, err
			}
			// Gated: a merge after a restart need not gate it again (a
			// failure ends in a rework, whose build runs the gates).
			if err := UpdateTriage(ctx, m.DB, item, func(rec *TriageRecord) bool {
				changed := rec.Ungated != ""
				rec.Ungated = ""
				return changed
			}); err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if passed {
				in.Fact = FactGatesPassed
				continue
			}
			in.Fact = FactGatesFailed
			end = triageEnd{cause: CauseGates, files: files, detail: feedback,
				context: fmt.Sprintf("Your branch was rebased onto %s cleanly, but the rebased change fails the gates:\n\n%s", target, clip(feedback, m.ContextLimit))}
		case StepMerge:
			out, err := m.Git.Merge(ctx, r)
			if err != nil || len(out.Conflict) == 0 {
				return out, err
			}
			files = out.Conflict
			in.Fact = FactSquashConflict
			end = squashEnd(files)
		case StepRework, StepPause:
			if err := UpdateTriage(ctx, m.DB, item, func(rec *TriageRecord) bool {
				rec.Conflicts++
				rec.Rebases += in.Rebases
				rec.Files, rec.Context, rec.Cause, rec.Next = end.files, end.context, end.cause, step
				return true
			}); err != nil {
				return pipeline.MergeOutcome{}, err
			}
			if end.cause == CauseGates {
				return pipeline.MergeOutcome{Refused: fmt.Sprintf("rebased onto %s, the change fails the gates: %s", target, message.Detail(end.detail, m.MaxDetail))}, nil
			}
			return pipeline.MergeOutcome{Conflict: end.files}, nil
		default:
			return pipeline.MergeOutcome{}, fmt.Errorf("team: conflict triage of %s: no step after %s", item, in.Fact)
		}
	}
}

// UpdateTriage changes a story's triage record (UpdateRecord).
func UpdateTriage(ctx context.Context, db store.Store, item foreman.ItemID, change func(*TriageRecord) bool) error {
	return UpdateRecord(ctx, db, KindTriage, string(item), change)
}

// ReworkDue is the coordinator's first look at a paused story: a pause
// that conflict triage gives back to the builder (ConflictReworkDue) is
// not the graph's to park; the stage to rework at is returned.
func ReworkDue(ctx context.Context, db store.Store, st pipeline.State, reworkStage func(paused int) int) (int, bool, error) {
	if st.Status != pipeline.StatusPaused || st.Pause == nil ||
		(st.Pause.Reason != pipeline.ReasonMergeConflict && st.Pause.Reason != pipeline.ReasonMergeFailed) {
		return 0, false, nil
	}
	var rec TriageRecord
	if _, err := GetRecord(ctx, db, KindTriage, string(st.Item), &rec); err != nil {
		return 0, false, err
	}
	stage := reworkStage(st.Stage)
	if stage < 0 || !ConflictReworkDue(st, rec) {
		return 0, false, nil
	}
	return stage, true, nil
}

// GrantRework records that the paused story st goes back to its builder
// for this pause (a restart finishes this rework and never starts a
// second); fresh is false when it was granted for this pause already.
func GrantRework(ctx context.Context, db store.Store, st pipeline.State) (rec TriageRecord, fresh bool, err error) {
	key := st.Pause.Key
	err = UpdateTriage(ctx, db, st.Item, func(r *TriageRecord) bool {
		if r.ReworkFor == key {
			rec = *r
			return false
		}
		r.Reworks++
		r.ReworkFor, r.Next = key, StepNone
		rec, fresh = *r, true
		return true
	})
	return rec, fresh, err
}

// clip keeps at most n bytes of s (n <= 0: all), saying what was cut.
func clip(s string, n int) string {
	if n <= 0 || len(s) <= n {
		return s
	}
	const cut = "\n[... cut]"
	return strings.ToValidUTF8(s[:max(n-len(cut), 0)], "") + cut
}

func union(a, b []string) []string {
	out := slices.Clone(a)
	for _, s := range b {
		if !slices.Contains(out, s) {
			out = append(out, s)
		}
	}
	return out
}

func shortCommit(c string) string {
	if len(c) > 12 {
		return c[:12]
	}
	return c
}
