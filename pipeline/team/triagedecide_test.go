package team

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline"
)

func TestTriageNext(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		in   triageInput
		want triageStep
	}{
		{"a squash conflict is rebased", triageInput{Fact: factSquashConflict, CanRework: true}, stepRebase},
		{"again after a clean rebase, while the target moves", triageInput{Fact: factSquashConflict, Rebases: maxTriageRebases - 1, CanRework: true}, stepRebase},
		{"a target that keeps moving ends in a rework", triageInput{Fact: factSquashConflict, Rebases: maxTriageRebases, CanRework: true}, stepRework},
		{"a target that keeps moving, reworked already: pause", triageInput{Fact: factSquashConflict, Rebases: maxTriageRebases, Reworks: 1, CanRework: true}, stepPause},
		{"a clean rebase is gated", triageInput{Fact: factRebaseClean, Rebases: 1}, stepRegate},
		{"passing gates merge", triageInput{Fact: factGatesPassed, Rebases: 1}, stepMerge},
		{"passing gates merge after a rework too", triageInput{Fact: factGatesPassed, Rebases: 1, Reworks: 1}, stepMerge},
		{"a rebase conflict goes back to the builder", triageInput{Fact: factRebaseConflict, Rebases: 1, CanRework: true}, stepRework},
		{"a second rebase conflict pauses", triageInput{Fact: factRebaseConflict, Rebases: 1, Reworks: 1, CanRework: true}, stepPause},
		{"a flow with no build stage pauses", triageInput{Fact: factRebaseConflict, Rebases: 1}, stepPause},
		{"failing gates on the rebased change go back to the builder", triageInput{Fact: factGatesFailed, Rebases: 1, CanRework: true}, stepRework},
		{"failing gates after the rework pause", triageInput{Fact: factGatesFailed, Rebases: 1, Reworks: 1, CanRework: true}, stepPause},
		{"no fact, no step", triageInput{}, stepNone},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, triageNext(c.in), "%s after %s", c.want, c.in.Fact)
		})
	}
}

func TestConflictReworkDue(t *testing.T) {
	t.Parallel()
	paused := func(reason pipeline.PauseReason, key string) pipeline.State {
		return pipeline.State{Item: "B", Status: pipeline.StatusPaused, Stage: 3, Pause: &pipeline.Escalation{Reason: reason, Key: key}}
	}
	cases := []struct {
		name string
		st   pipeline.State
		rec  triageRecord
		want bool
	}{
		{"the triage decided a rework", paused(pipeline.ReasonMergeConflict, "k1"), triageRecord{Next: stepRework}, true},
		{"the rebased change failed the gates", paused(pipeline.ReasonMergeFailed, "k1"), triageRecord{Next: stepRework, Cause: causeGates}, true},
		{"granted for this pause, a crash before it resumed", paused(pipeline.ReasonMergeConflict, "k1"), triageRecord{Reworks: 1, ReworkFor: "k1"}, true},
		{"granted for an earlier pause: never twice", paused(pipeline.ReasonMergeConflict, "k2"), triageRecord{Reworks: 1, ReworkFor: "k1", Next: stepPause}, false},
		{"the triage decided a pause", paused(pipeline.ReasonMergeConflict, "k1"), triageRecord{Next: stepPause}, false},
		{"a merge refused for another cause", paused(pipeline.ReasonMergeFailed, "k1"), triageRecord{}, false},
		{"another pause", paused(pipeline.ReasonStageError, "k1"), triageRecord{Next: stepRework}, false},
		{"a story at work", pipeline.State{Status: pipeline.StatusActive}, triageRecord{Next: stepRework}, false},
		{"a merged story", pipeline.State{Status: pipeline.StatusDone}, triageRecord{Next: stepRework}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			assert.Equal(t, c.want, conflictReworkDue(c.st, c.rec))
		})
	}
}

func TestReworkStage(t *testing.T) {
	t.Parallel()
	story := DefaultStages(pipeline.StoryFlow(pipeline.StoryConfig{}))
	assert.Equal(t, 2, reworkStage(story, 3), "the story flow's quality gate goes back to execute")
	assert.Equal(t, 0, reworkStage(DefaultStages(pipeline.TaskFlow(pipeline.StoryConfig{})), 0), "the task flow's one build stage")
	assert.Equal(t, -1, reworkStage([]Stage{{Kind: StageAgent}, {Kind: StageGate}}, 1), "no build stage")
}

func TestConflictContextShowsBothSidesOfEachFile(t *testing.T) {
	t.Parallel()
	c := &merge.ConflictError{Files: []string{"a.txt", "gone.txt", "mode.sh", "more.txt"}, Conflicts: []merge.ConflictFile{
		{Path: "a.txt", Hunks: []merge.Hunk{
			{Line: 4, Before: []string{"4", "5"}, Target: []string{"two-A"}, Item: []string{"two-B"}, Label: "1234abc (B: two)", After: []string{"6", "7"}},
			{Line: 14, Before: []string{"14"}, Target: []string{"x"}, Base: []string{"w"}, Item: []string{"y"}, Label: "1234abc (B: two)"},
		}},
		{Path: "gone.txt", Missing: true},
		{Path: "mode.sh"},
	}}
	got := conflictContext("main", c)
	assert.Contains(t, got, "conflicts in a.txt, gone.txt, mode.sh, more.txt")
	assert.Contains(t, got, "\n--- a.txt\n4\n5\n<<<<<<< main\ntwo-A\n=======\ntwo-B\n>>>>>>> yours 1234abc (B: two)\n6\n7\n...\n14\n<<<<<<< main\nx\n||||||| base\nw\n=======\ny\n>>>>>>> yours 1234abc (B: two)\n")
	assert.Contains(t, got, "--- gone.txt\n(no file in the worktree: deleted on one side and changed on the other)")
	assert.Contains(t, got, "--- mode.sh\n(no conflict markers")
	assert.Contains(t, got, "(and 1 more files)")

	// Hunks that follow each other directly are not marked apart; a
	// clipped file says so.
	next := merge.Hunk{Line: 13, Target: []string{"p"}, Item: []string{"q"}}
	c.Conflicts = []merge.ConflictFile{{Path: "a.txt", Hunks: []merge.Hunk{c.Conflicts[0].Hunks[0], next}, Clipped: true}}
	got = conflictContext("main", c)
	assert.Contains(t, got, "6\n7\n<<<<<<< main\np\n=======\nq\n>>>>>>> yours\n[... cut]")
	assert.NotContains(t, got, "...\n")

	big := &merge.ConflictError{Files: []string{"big"}, Conflicts: []merge.ConflictFile{{Path: "big",
		Hunks: []merge.Hunk{{Line: 1, Target: []string{strings.Repeat("x", 3*maxContextTotal)}, Item: []string{"mine"}}}}}}
	assert.LessOrEqual(t, len(conflictContext("main", big)), maxContextTotal, "bounded whatever merge returns")
}
