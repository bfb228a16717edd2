package team

import (
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// Conflict triage's deterministic core is teamcore's (triagedecide.go
// there), shared with the simulator: what the team does when a story's
// squash merge conflicts. These are its names in the team.

type (
	triageRecord = teamcore.TriageRecord
	triageStep   = teamcore.TriageStep
	triageInput  = teamcore.TriageInput
)

const (
	factSquashConflict = teamcore.FactSquashConflict
	factRebaseClean    = teamcore.FactRebaseClean
	factRebaseConflict = teamcore.FactRebaseConflict
	factGatesPassed    = teamcore.FactGatesPassed
	factGatesFailed    = teamcore.FactGatesFailed

	stepNone   = teamcore.StepNone
	stepRebase = teamcore.StepRebase
	stepRegate = teamcore.StepRegate
	stepMerge  = teamcore.StepMerge
	stepRework = teamcore.StepRework
	stepPause  = teamcore.StepPause

	maxTriageRebases   = teamcore.MaxTriageRebases
	maxConflictReworks = teamcore.MaxConflictReworks

	causeConflict = teamcore.CauseConflict
	causeGates    = teamcore.CauseGates
)

func triageNext(in triageInput) triageStep { return teamcore.TriageNext(in) }

func conflictReworkDue(st pipeline.State, rec triageRecord) bool {
	return teamcore.ConflictReworkDue(st, rec)
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
