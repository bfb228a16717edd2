package pipeline

import (
	"slices"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/health"
)

// poison is an effect with every field set: left in a buffer's spare
// capacity, any field AppendStep forgets to set shows in its effects.
var poison = Effect{Kind: EffectMerge, Resume: true, Index: 99, Step: 99, Item: "OLD-1", Stage: 9,
	Worker: "w", Assignment: "a", Readiness: "r", Feedback: "f", Title: "t", BoardStatus: "b",
	Escalation: &Escalation{Key: "k", Message: "old"}}

// TestAppendStepEqualsStep runs randomWalks and checks, at every step, that
// AppendStep gives Step's state, effects and error whatever it appends to:
// nil (also nil where Step's effects are nil), a slice whose spare capacity
// holds old effects (its elements left as they were), a full slice that
// must grow, and one buffer reused by the whole walk. The reused buffer
// never reaches into a state: each state is checked unchanged when the
// next step writes over the buffer.
func TestAppendStepEqualsStep(t *testing.T) {
	var buf []Effect
	prefix := []Effect{{Kind: EffectAck, Item: "OTHER-1", Step: 7}, {Kind: EffectSpawn, Item: "OTHER-1", Step: 7, Index: 1}}
	steps := randomWalks(t, func(f *Flow, s State, ev Event, now time.Time, where string) (State, error) {
		want, wantEffs, wantErr := f.Step(s, ev, now)

		got, effs, err := f.AppendStep(nil, s, ev, now)
		assert.Equal(t, wantErr, err, where)
		assert.Equal(t, want, got, where)
		require.Equal(t, wantEffs, effs, where)
		assert.Equal(t, wantEffs == nil, effs == nil, where+": nil effects")

		// Existing elements, then spare capacity full of old effects.
		existing := make([]Effect, len(prefix), len(prefix)+8)
		copy(existing, prefix)
		for i := len(prefix); i < cap(existing); i++ {
			existing[:cap(existing)][i] = poison
		}
		got, effs, err = f.AppendStep(existing, s, ev, now)
		assert.Equal(t, wantErr, err, where)
		assert.Equal(t, want, got, where)
		require.Len(t, effs, len(prefix)+len(wantEffs), where)
		assert.Equal(t, prefix, existing, where+": the existing elements changed")
		assert.Equal(t, prefix, effs[:len(prefix)], where)
		assert.Equal(t, wantEffs, nilIfEmpty(effs[len(prefix):]), where)

		// A full slice grows.
		full := slices.Clip(slices.Clone(prefix))
		_, effs, _ = f.AppendStep(full, s, ev, now)
		assert.Equal(t, prefix, full, where+": the existing elements changed")
		assert.Equal(t, wantEffs, nilIfEmpty(effs[len(prefix):]), where)

		// One buffer for the whole walk, holding the effects of earlier
		// steps: the input state (the previous step's output) must not
		// share it.
		before := deepCopy(s)
		got, effs, err = f.AppendStep(buf[:0], s, ev, now)
		require.Equal(t, before, s, where+": a reused buffer changed the input state")
		assert.Equal(t, wantErr, err, where)
		assert.Equal(t, want, got, where)
		assert.Equal(t, wantEffs, nilIfEmpty(effs), where)
		buf = effs
		return got, err
	})
	assert.Greater(t, steps, 1000, "most events applied")
	assert.NotZero(t, cap(buf), "the buffer was used")
}

func nilIfEmpty(effs []Effect) []Effect {
	if len(effs) == 0 {
		return nil
	}
	return effs
}

// TestAppendStepNumbersItsOwnEffects: appended effects are numbered from 0
// within their transition, so their keys (and an escalation's, which is
// its effect's) do not depend on what the slice held before.
func TestAppendStepNumbersItsOwnEffects(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	s := atStage(t, f, 1)
	pending := []Effect{{Kind: EffectAck, Item: "OTHER-1", Step: 3}, {Kind: EffectAppendReport, Item: "OTHER-1", Step: 3, Index: 1}}
	ev := reportEv(s, 1, Error, "", "boom") // Stage 1 ERROR pauses: ACK, remove worktree, escalate, shutdown, report
	want, wantEffs := mustStep(t, f, s, ev, t0.Add(time.Hour))
	got, effs, err := f.AppendStep(pending, s, ev, t0.Add(time.Hour))
	require.NoError(t, err)
	require.Len(t, effs, 2+len(wantEffs))
	assert.Equal(t, pending, effs[:2])
	assert.Equal(t, wantEffs, effs[2:])
	for i, e := range effs[2:] {
		assert.Equal(t, int32(i), e.Index)
		assert.Equal(t, wantEffs[i].Key(), e.Key())
	}
	assert.Equal(t, want, got)
	require.NotNil(t, got.Pause)
	assert.Equal(t, effs[2+slices.IndexFunc(wantEffs, func(e Effect) bool { return e.Kind == EffectEscalate })].Key(), got.Pause.Key)
}

// TestAppendStepReusedBufferAcrossStories drives stories one after another
// through one buffer, as a host that carries out each transition's effects
// before the next would, and compares every transition with Step's fresh
// slices, crash handling included.
func TestAppendStepReusedBufferAcrossStories(t *testing.T) {
	f := StoryFlow(StoryConfig{})
	buf := make([]Effect, 0, 2)
	var states, copies []State
	for story := range 3 {
		now := t0.Add(time.Duration(story) * time.Hour)
		s := State{Item: item}
		events := []func(State) Event{
			func(State) Event { return Event{Kind: EventStart, Title: "Login"} },
			func(s State) Event { return reportEv(s, 0, Complete, "4", "") },
			func(s State) Event { return from(s, Event{Kind: EventIdle}) },
			func(s State) Event { return from(s, Event{Kind: EventIdle}) },
			func(s State) Event { return reportEv(s, 1, Go, "9", "") },
			func(s State) Event { return reportEv(s, 2, Complete, "", "") },
			func(s State) Event { return reportEv(s, 3, Pass, "92", "") },
			func(State) Event { return Event{Kind: EventMerged, Commit: "c0ffee"} },
		}
		for i, evOf := range events {
			ev := evOf(s)
			now = now.Add(time.Minute)
			want, wantEffs := mustStep(t, f, s, ev, now)
			next, effs, err := f.AppendStep(buf[:0], s, ev, now)
			require.NoError(t, err)
			assert.Equal(t, want, next, "story %d event %d", story, i)
			assert.Equal(t, wantEffs, effs, "story %d event %d", story, i)
			states, copies = append(states, next), append(copies, deepCopy(next))
			buf, s = effs, next
		}
		assert.Equal(t, StatusDone, s.Status)
		assert.Equal(t, health.Working, s.Crash.Phase)
	}
	assert.LessOrEqual(t, cap(buf), 8, "the buffer grows to the largest transition, not with the stories")
	assert.Equal(t, copies, states, "a state kept while the buffer was reused changed")
}
