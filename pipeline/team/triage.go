package team

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// Conflict triage (teamcore.Triager, shared with the simulator) does the
// team's git work through triageGit: merge.Manager's rebase in the story's
// worktree (triagegit.go), the gate plan, and the team's events.

// Bounds of the conflict context an agent is given: per file, in all, and
// how many files are shown.
const (
	maxContextPerFile = 2000
	maxContextTotal   = 8000
	maxContextFiles   = 8
)

// triageMerger is the pipeline's Merger: pipeline.Git's squash merge, with
// conflict triage when the squash conflicts.
func (t *Team) triageMerger(git pipeline.Git) teamcore.Triager {
	return teamcore.Triager{DB: t.db, Flow: laterFlow{t}, Git: triageGit{t: t, git: git},
		ReworkStage: func(paused int) int { return reworkStage(t.cfg.Stages, paused) }, MaxDetail: maxDetail, ContextLimit: maxContextTotal}
}

// laterFlow reads the team's flow, which is made after its Merger.
type laterFlow struct{ t *Team }

func (f laterFlow) Get(ctx context.Context, item foreman.ItemID) (pipeline.State, error) {
	return f.t.pipe.Get(ctx, item)
}

// triageGit is the team's git work for conflict triage.
type triageGit struct {
	t   *Team
	git pipeline.Git
}

func (g triageGit) Target() string { return g.t.targetBranch() }

func (g triageGit) Merge(ctx context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return g.git.Merge(ctx, r)
}

func (g triageGit) Rebase(ctx context.Context, item foreman.ItemID) (teamcore.Rebased, error) {
	rb, err := g.t.rebaseOnto(ctx, item)
	return teamcore.Rebased{Clean: rb.clean, Head: rb.head, Files: rb.files, Context: rb.context}, err
}

func (g triageGit) Regate(ctx context.Context, a pipeline.AgentAssignment) (bool, string, error) {
	dir, err := g.t.mgr.Path(a.Item)
	if err != nil {
		return false, "", err
	}
	return g.t.regate(ctx, a, dir)
}

func (g triageGit) Saw(a pipeline.AgentAssignment, fact teamcore.TriageFact, files []string, detail string) {
	kind, outcome := EventConflict, pipeline.Outcome("SQUASH")
	switch fact {
	case factRebaseClean:
		kind, outcome = EventRebased, "CLEAN"
	case factRebaseConflict:
		outcome = "REBASE"
	}
	g.t.events.add(Event{Kind: kind, At: g.t.clk.Now(), Story: a.Item, Stage: a.Stage, Role: g.t.role(a.Stage),
		Assignment: a.Assignment, Outcome: outcome, Files: slices.Clone(files), Detail: detail})
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

// reworkDue is the coordinator's first look at a paused story
// (teamcore.ReworkDue): a pause that conflict triage gives back to the
// builder is not the graph's to park.
func (t *Team) reworkDue(ctx context.Context, st pipeline.State) (int, bool, error) {
	return teamcore.ReworkDue(ctx, t.db, st, func(paused int) int { return reworkStage(t.cfg.Stages, paused) })
}

// grantRework gives a conflicting story back to its builder: the grant is
// recorded first (teamcore.GrantRework), the conflict goes into the
// story's memory (the builder's prompt shows it), and the note for the
// builder is returned (the coordinator resumes the flow at the build
// stage with it).
func (t *Team) grantRework(ctx context.Context, st pipeline.State, stage int) (string, error) {
	rec, fresh, err := teamcore.GrantRework(ctx, t.db, st)
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
