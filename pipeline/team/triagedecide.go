package team

import (
	"github.com/agentforeman/foreman/pipeline"
)

// This file is conflict triage's deterministic core: what the team does
// when a story's squash merge conflicts, as pure functions of what just
// happened and what the triage record says. The merger (triage.go)
// gathers the facts (the squash, the rebase, the gates) and acts.

// triageFact is what just happened to a story's merge.
type triageFact uint8

const (
	// factSquashConflict: the squash onto the target conflicts.
	factSquashConflict triageFact = iota + 1
	// factRebaseClean: the story's branch rebased onto the target cleanly.
	factRebaseClean
	// factRebaseConflict: the rebase conflicts too (it was aborted).
	factRebaseConflict
	// factGatesPassed and factGatesFailed: the gate plan on the rebased
	// change.
	factGatesPassed
	factGatesFailed
)

func (f triageFact) String() string {
	switch f {
	case factSquashConflict:
		return "squash conflict"
	case factRebaseClean:
		return "rebase clean"
	case factRebaseConflict:
		return "rebase conflict"
	case factGatesPassed:
		return "gates passed"
	case factGatesFailed:
		return "gates failed"
	}
	return "unknown fact"
}

// triageStep is what the team does next.
type triageStep uint8

const (
	stepNone triageStep = iota
	// stepRebase: rebase the story's branch onto the target in its worktree.
	stepRebase
	// stepRegate: run the gate plan on the rebased change.
	stepRegate
	// stepMerge: squash-merge the rebased change.
	stepMerge
	// stepRework: give the story back to its builder, once, with the
	// conflict (or the gates' failure) in its memory.
	stepRework
	// stepPause: pause the story with an escalation naming the files.
	stepPause
)

func (s triageStep) String() string {
	switch s {
	case stepRebase:
		return "rebase"
	case stepRegate:
		return "regate"
	case stepMerge:
		return "merge"
	case stepRework:
		return "rework"
	case stepPause:
		return "pause"
	}
	return "none"
}

// maxTriageRebases bounds the rebases of one merge attempt: a target that
// keeps moving under a story (others landing between its rebase and its
// merge) ends the attempt rather than looping.
const maxTriageRebases = 3

// maxConflictReworks is how many times a conflicting story goes back to
// its agent before it waits for a person.
const maxConflictReworks = 1

// triageInput is what triageNext decides from.
type triageInput struct {
	Fact triageFact
	// Rebases is how many rebases this merge attempt has done.
	Rebases int
	// Reworks is how many reworks the story has had for conflicts (kept
	// in its triage record, so a restarted host counts them too).
	Reworks int
	// CanRework: the flow has a build stage to send the story back to.
	CanRework bool
}

// triageNext decides the next step of a story's conflict triage: rebase
// on a squash conflict, run the gates on a clean rebase, merge when they
// pass; when the conflict stays (the rebase conflicts, the rebased change
// fails the gates, the target keeps moving), one rework by the agent,
// then a pause.
func triageNext(in triageInput) triageStep {
	switch in.Fact {
	case factSquashConflict:
		if in.Rebases < maxTriageRebases {
			return stepRebase
		}
	case factRebaseClean:
		return stepRegate
	case factGatesPassed:
		return stepMerge
	case factRebaseConflict, factGatesFailed:
	default:
		return stepNone
	}
	if in.CanRework && in.Reworks < maxConflictReworks {
		return stepRework
	}
	return stepPause
}

// conflictReworkDue decides, for a story whose merge the flow paused,
// whether the team gives it back to its builder instead of waiting for a
// person: the pause is one the triage ended with a rework decided (Next),
// or the rework was already granted for this very pause and a crash came
// before the story went back to work (ReworkFor is the pause's key). A
// rework granted for an earlier pause is not granted again.
func conflictReworkDue(st pipeline.State, rec triageRecord) bool {
	if st.Status != pipeline.StatusPaused || st.Pause == nil {
		return false
	}
	switch st.Pause.Reason {
	case pipeline.ReasonMergeConflict, pipeline.ReasonMergeFailed:
	default:
		return false
	}
	if rec.ReworkFor != "" && rec.ReworkFor == st.Pause.Key {
		return true
	}
	return rec.Next == stepRework
}

// reworkStage is the stage a conflicting story goes back to: the last
// build stage at or before the stage it paused at, or -1 when the flow has
// none.
func reworkStage(stages []Stage, paused int) int {
	for i := min(paused, len(stages)-1); i >= 0; i-- {
		if stages[i].Kind == StageBuild {
			return i
		}
	}
	return -1
}
