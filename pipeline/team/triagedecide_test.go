package team

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"

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

func TestConflictHunks(t *testing.T) {
	t.Parallel()
	file := strings.Join([]string{"1", "2", "3", "4", "5", "<<<<<<< HEAD", "two-A", "=======", "two-B",
		">>>>>>> 1234abc (B: two)", "6", "7", "8", "9", "10"}, "\n")
	got := conflictHunks(file, "main", 2, 1000)
	assert.Equal(t, strings.Join([]string{"4", "5", "<<<<<<< main", "two-A", "=======", "two-B",
		">>>>>>> yours 1234abc (B: two)", "6", "7"}, "\n"), got)

	two := file + "\n11\n12\n13\n14\n<<<<<<< HEAD\nx\n=======\ny\n>>>>>>> 1234abc (B: two)\n15"
	assert.Contains(t, conflictHunks(two, "main", 1, 1000), "6\n...\n14\n<<<<<<< main", "separate hunks are marked apart")
	assert.Empty(t, conflictHunks("no markers\n", "main", 3, 1000))

	big := "<<<<<<< HEAD\n" + strings.Repeat("a line of main\n", 500) + "=======\nmine\n>>>>>>> c\n"
	clipped := conflictHunks(big, "main", 3, 300)
	assert.LessOrEqual(t, len(clipped), 300)
	assert.True(t, strings.HasSuffix(clipped, "[... cut]"))
}
