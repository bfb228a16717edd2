package teamcore

import (
	"github.com/agentforeman/foreman/pipeline"
)

// This file is conflict triage's deterministic core: what the team does
// when a story's squash merge conflicts, as pure functions of what just
// happened and what the triage record says. The merger (triage.go)
// gathers the facts (the squash, the rebase, the gates) and acts.

// TriageFact is what just happened to a story's merge.
type TriageFact uint8

const (
	// FactSquashConflict: the squash onto the target conflicts.
	FactSquashConflict TriageFact = iota + 1
	// FactRebaseClean: the story's branch rebased onto the target cleanly.
	FactRebaseClean
	// FactRebaseConflict: the rebase conflicts too (it was aborted).
	FactRebaseConflict
	// FactGatesPassed and FactGatesFailed: the gate plan on the rebased
	// change.
	FactGatesPassed
	FactGatesFailed
)

func (f TriageFact) String() string {
	switch f {
	case FactSquashConflict:
		return "squash conflict"
	case FactRebaseClean:
		return "rebase clean"
	case FactRebaseConflict:
		return "rebase conflict"
	case FactGatesPassed:
		return "gates passed"
	case FactGatesFailed:
		return "gates failed"
	}
	return "unknown fact"
}

// TriageStep is what the team does next.
type TriageStep uint8

const (
	StepNone TriageStep = iota
	// StepRebase: rebase the story's branch onto the target in its worktree.
	StepRebase
	// StepRegate: run the gate plan on the rebased change.
	StepRegate
	// StepMerge: squash-merge the rebased change.
	StepMerge
	// StepRework: give the story back to its builder, once, with the
	// conflict (or the gates' failure) in its memory.
	StepRework
	// StepPause: pause the story with an escalation naming the files.
	StepPause
)

func (s TriageStep) String() string {
	switch s {
	case StepRebase:
		return "rebase"
	case StepRegate:
		return "regate"
	case StepMerge:
		return "merge"
	case StepRework:
		return "rework"
	case StepPause:
		return "pause"
	}
	return "none"
}

// MaxTriageRebases bounds the rebases of one merge attempt: a target that
// keeps moving under a story (others landing between its rebase and its
// merge) ends the attempt rather than looping.
const MaxTriageRebases = 3

// MaxConflictReworks is how many times a conflicting story goes back to
// its agent before it waits for a person.
const MaxConflictReworks = 1

// TriageInput is what TriageNext decides from.
type TriageInput struct {
	Fact TriageFact
	// Rebases is how many rebases this merge attempt has done.
	Rebases int
	// Reworks is how many reworks the story has had for conflicts (kept
	// in its triage record, so a restarted host counts them too).
	Reworks int
	// CanRework: the flow has a build stage to send the story back to.
	CanRework bool
}

// TriageNext decides the next step of a story's conflict triage: rebase
// on a squash conflict, run the gates on a clean rebase, merge when they
// pass; when the conflict stays (the rebase conflicts, the rebased change
// fails the gates, the target keeps moving), one rework by the agent,
// then a pause.
func TriageNext(in TriageInput) TriageStep {
	switch in.Fact {
	case FactSquashConflict:
		if in.Rebases < MaxTriageRebases {
			return StepRebase
		}
	case FactRebaseClean:
		return StepRegate
	case FactGatesPassed:
		return StepMerge
	case FactRebaseConflict, FactGatesFailed:
	default:
		return StepNone
	}
	if in.CanRework && in.Reworks < MaxConflictReworks {
		return StepRework
	}
	return StepPause
}

// ConflictReworkDue decides, for a story whose merge the flow paused,
// whether the team gives it back to its builder instead of waiting for a
// person: the pause is one the triage ended with a rework decided (Next),
// or the rework was already granted for this very pause and a crash came
// before the story went back to work (ReworkFor is the pause's key). A
// rework granted for an earlier pause is not granted again.
func ConflictReworkDue(st pipeline.State, rec TriageRecord) bool {
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
	return rec.Next == StepRework
}
