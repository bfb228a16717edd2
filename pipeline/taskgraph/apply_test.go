package taskgraph

import (
	"fmt"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestApplyMatchesHandle drives the same wake-ups through Handle (copy on
// write) and Apply (in place): same results, same sessions.
func TestApplyMatchesHandle(t *testing.T) {
	for _, limit := range []int{0, 1, 2} {
		t.Run(fmt.Sprintf("MaxActive=%d", limit), func(t *testing.T) { applyMatchesHandle(t, limit) })
	}
}

func applyMatchesHandle(t *testing.T, limit int) {
	c := NewCore(CoreConfig{MaxActive: limit})
	cow := newSession(t, c, ModeFullLifecycleFE)
	inPlace := newSession(t, c, ModeFullLifecycleFE)
	step := func(w WakeUp) {
		t.Helper()
		n, want, err := c.Handle(cow, w)
		require.NoError(t, err)
		got, err := c.Apply(inPlace, w)
		require.NoError(t, err)
		assert.Equal(t, want, got)
		cow = n
		a, _ := cow.MarshalJSON()
		b, _ := inPlace.MarshalJSON()
		require.JSONEq(t, string(a), string(b))
	}
	step(WakeUp{At: t0})
	step(WakeUp{Handler: HandleCheck, At: t0})
	for cow.Status != SessionCompleted {
		if cow.Status == SessionPaused {
			step(WakeUp{Handler: HandleSpawnNext, At: t0})
			step(WakeUp{Handler: HandleResume, At: t0})
			continue
		}
		w := cow.ActiveWorkers[0]
		step(WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: OutcomeCompleted, At: t0})
		step(WakeUp{Handler: HandleCallback, Role: w.Role, Assignment: w.Assignment, Outcome: OutcomeCompleted, At: t0}) // duplicate
	}

	before, _ := inPlace.MarshalJSON()
	_, err := c.Apply(inPlace, WakeUp{Handler: HandleCallback})
	assert.ErrorIs(t, err, ErrInvalidWakeUp)
	_, err = c.Apply(nil, WakeUp{})
	assert.ErrorIs(t, err, ErrInvalidWakeUp)
	after, _ := inPlace.MarshalJSON()
	assert.JSONEq(t, string(before), string(after), "an error leaves the session as it was")
}
