package pipeline

import (
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestTaskFlow(t *testing.T) {
	f := TaskFlow(StoryConfig{})
	require.NoError(t, f.Validate())
	s, effs := mustStep(t, f, State{Item: item}, Event{Kind: EventStart, Title: "task"}, t0)
	assert.Equal(t, []EffectKind{EffectCreateWorktree, EffectSpawn}, kinds(effs))
	assert.Equal(t, "task-"+string(item), string(s.Worker))

	// COMPLETE merges (no board is read), and the merge makes it DONE.
	done, effs := mustStep(t, f, s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Complete}), t0.Add(time.Minute))
	assert.Contains(t, kinds(effs), EffectMerge)
	assert.False(t, f.NeedsBoard(0, Complete))
	done, _ = mustStep(t, f, done, Event{Kind: EventMerged, Commit: "abc"}, t0.Add(2*time.Minute))
	assert.Equal(t, StatusDone, done.Status)
	assert.Equal(t, "Done", done.Stages[0].Result)

	// ERROR pauses with an escalation that carries the detail.
	paused, effs := mustStep(t, f, s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Error, Detail: "tests fail"}), t0.Add(time.Minute))
	assert.Equal(t, StatusPaused, paused.Status)
	assert.Contains(t, kinds(effs), EffectEscalate)
	require.NotNil(t, paused.Pause)
	assert.Equal(t, "Task "+string(item)+" failed: tests fail", paused.Pause.Message)

	// Any other outcome is not in its table.
	_, _, err := f.Step(s, from(s, Event{Kind: EventReport, Stage: 0, Outcome: Go}), t0)
	assert.ErrorIs(t, err, ErrInvalidTransition)
}
