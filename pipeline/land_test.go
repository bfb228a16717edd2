package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestALandersFeedbackTakesAQualityCycle: a merging story whose landing a
// check refused goes back to the build stage with the check's feedback,
// counted against the quality cycles; the refusal past them pauses it.
func TestALandersFeedbackTakesAQualityCycle(t *testing.T) {
	f := StoryFlow(StoryConfig{QualityCycles: 2})
	m := atStage(t, f, 3)
	m, effs := mustStep(t, f, m, reportEv(m, 3, Pass, "90", ""), t0)
	require.Equal(t, StatusMerging, m.Status)
	require.Equal(t, EffectMerge, effs[len(effs)-1].Kind)

	fb := "check test failed:\n--- FAIL: TestX"
	back, effs := mustStep(t, f, m, Event{Kind: EventLandRejected, Outcome: Fail, Detail: fb}, t0.Add(time.Minute))
	assert.Equal(t, StatusActive, back.Status)
	assert.Equal(t, 2, back.Stage, "back to the build stage")
	assert.Equal(t, fb, back.Feedback)
	assert.Equal(t, 1, back.Stages[3].Failures)
	assert.Equal(t, []EffectKind{EffectShutdown, EffectSpawn}, kinds(effs))
	assert.Equal(t, fb, effs[1].Feedback, "the builder's spawn carries the feedback")
	assert.True(t, back.Worktree, "the worktree stays: the fix goes on the same branch")

	_, _, err := f.Step(back, Event{Kind: EventLandRejected, Outcome: Fail, Detail: fb}, t0)
	assert.ErrorIs(t, err, ErrInvalidTransition, "a repeated report is refused: the story is no longer merging")
	_, _, err = f.Step(m, Event{Kind: EventLandRejected, Outcome: Pass}, t0)
	assert.ErrorIs(t, err, ErrInvalidTransition, "only a rule that sends it back or pauses applies")

	// The second refusal is past the cycles: the story pauses.
	again := back
	for again.Stage < 3 {
		again, _ = mustStep(t, f, again, reportEv(again, again.Stage, Complete, "", ""), t0.Add(2*time.Minute))
	}
	again, _ = mustStep(t, f, again, reportEv(again, 3, Pass, "90", ""), t0.Add(3*time.Minute))
	require.Equal(t, StatusMerging, again.Status)
	paused, _ := mustStep(t, f, again, Event{Kind: EventLandRejected, Outcome: Fail, Detail: "review: rename it"}, t0.Add(4*time.Minute))
	assert.Equal(t, StatusPaused, paused.Status)
	assert.Equal(t, ReasonRetriesExhausted, paused.Pause.Reason)
	assert.Contains(t, paused.Pause.Message, "review: rename it")
}
