package health

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Every row of the transition table, written out independently of it.
func TestStepEveryTransition(t *testing.T) {
	at := t0.Add(time.Minute)
	within := State{Crashes: 0} // budget 1: the next crash is the first
	over := State{Crashes: 1}   // budget 1: the next crash is the second
	tests := []struct {
		from    Phase
		state   State
		event   EventKind
		to      Phase
		crashes int
		reason  PauseReason
		effects []Effect
	}{
		{Working, within, EventIdle, Suspicious, 0, NoPause, []Effect{EffectSendProbe}},
		{Working, within, EventStatusReply, Working, 0, NoPause, nil},
		{Working, within, EventCompleted, Completed, 0, NoPause, nil},
		{Working, within, EventDoneMarker, Completed, 0, NoPause, []Effect{EffectSynthesizeCompletion}},
		{Working, within, EventDoneMarkerUnconfirmed, Suspicious, 0, NoPause, []Effect{EffectSendProbe}},

		{Suspicious, within, EventIdle, Suspicious, 0, NoPause, []Effect{EffectSendProbe}},
		{Suspicious, within, EventProbeSent, Probing, 0, NoPause, []Effect{EffectArmProbeTimeout}},
		{Suspicious, within, EventProbeFailed, CheckingItem, 1, NoPause, []Effect{EffectCheckItemOpen}},
		{Suspicious, over, EventProbeFailed, Paused, 2, ReasonCrashBudgetExhausted, []Effect{EffectEscalate}},
		{Suspicious, within, EventStatusReply, Working, 0, NoPause, nil},
		{Suspicious, within, EventCompleted, Completed, 0, NoPause, nil},
		{Suspicious, within, EventDoneMarker, Completed, 0, NoPause, []Effect{EffectSynthesizeCompletion}},

		{Probing, within, EventStatusReply, Working, 0, NoPause, []Effect{EffectCancelProbeTimeout}},
		{Probing, within, EventIdle, CheckingItem, 1, NoPause, []Effect{EffectCancelProbeTimeout, EffectCheckItemOpen}},
		{Probing, over, EventIdle, Paused, 2, ReasonCrashBudgetExhausted, []Effect{EffectCancelProbeTimeout, EffectEscalate}},
		{Probing, within, EventProbeTimeout, CheckingItem, 1, NoPause, []Effect{EffectCheckItemOpen}},
		{Probing, over, EventProbeTimeout, Paused, 2, ReasonCrashBudgetExhausted, []Effect{EffectEscalate}},
		{Probing, within, EventCompleted, Completed, 0, NoPause, []Effect{EffectCancelProbeTimeout}},
		{Probing, within, EventDoneMarker, Completed, 0, NoPause, []Effect{EffectCancelProbeTimeout, EffectSynthesizeCompletion}},
		{Probing, within, EventDoneMarkerUnconfirmed, Probing, 0, NoPause, nil},

		{CheckingItem, within, EventItemOpen, Resuming, 0, NoPause, []Effect{EffectResume}},
		{CheckingItem, within, EventItemClosed, Closed, 0, NoPause, []Effect{EffectReportClosed}},
		{CheckingItem, within, EventItemCheckFailed, Paused, 0, ReasonItemCheckFailed, []Effect{EffectEscalate}},

		{Resuming, within, EventResumed, Working, 0, NoPause, nil},
		{Resuming, within, EventResumeFailed, Paused, 0, ReasonResumeFailed, []Effect{EffectEscalate}},
	}
	covered := map[[2]int]bool{}
	for _, tt := range tests {
		guard := ""
		if tt.state.Crashes > 0 {
			guard = "/over-budget"
		}
		t.Run(fmt.Sprintf("%s/%s%s", tt.from, tt.event, guard), func(t *testing.T) {
			in := tt.state
			in.Phase = tt.from
			in.Since = t0
			got, effects, err := Step(in, Event{Kind: tt.event, At: at}, 1)
			require.NoError(t, err)
			assert.Equal(t, tt.to, got.Phase)
			assert.Equal(t, tt.crashes, got.Crashes)
			assert.Equal(t, tt.reason, got.PauseReason)
			assert.Equal(t, tt.effects, effects)
			wantSince := t0
			if tt.to != tt.from {
				wantSince = at
			}
			assert.Equal(t, wantSince, got.Since)
			wantProbes := 0
			if len(tt.effects) > 0 && tt.effects[0] == EffectSendProbe {
				wantProbes = 1
			}
			assert.Equal(t, wantProbes, got.Probes)
		})
		covered[[2]int{int(tt.from), int(tt.event)}] = true
	}
	assert.Len(t, tests, transitionCount, "one case per table row")

	// Every other (phase, event) pair is a typed error that leaves the state alone.
	for p := Phase(0); p < numPhases; p++ {
		for e := EventKind(0); e < numEventKinds; e++ {
			if covered[[2]int{int(p), int(e)}] {
				continue
			}
			in := State{Phase: p, Crashes: 1, Probes: 2, Since: t0}
			got, effects, err := Step(in, Event{Kind: e, At: at}, 1)
			require.ErrorIs(t, err, ErrInvalidTransition, "%s/%s", p, e)
			var te *TransitionError
			require.True(t, errors.As(err, &te))
			assert.Equal(t, &TransitionError{Phase: p, Event: e}, te)
			assert.Equal(t, in, got)
			assert.Nil(t, effects)
		}
	}
}

// Every event appears in the table and every phase is reachable from Working.
func TestStepEveryEventAndPhaseReachable(t *testing.T) {
	events := map[EventKind]bool{}
	reached := map[Phase]bool{Working: true}
	for changed := true; changed; {
		changed = false
		for _, tr := range transitionTable() {
			events[tr.on] = true
			if reached[tr.from] && !reached[tr.to] {
				reached[tr.to], changed = true, true
			}
		}
	}
	for e := EventKind(0); e < numEventKinds; e++ {
		assert.True(t, events[e], "event %s is used", e)
	}
	for p := Phase(0); p < numPhases; p++ {
		assert.True(t, reached[p], "phase %s is reachable", p)
		if p.Terminal() {
			for _, tr := range transitionTable() {
				assert.NotEqual(t, p, tr.from, "terminal phase %s has no exits", p)
			}
		}
	}
}

// The table is a value: changing a copy, or the effects Step returned,
// changes nothing for the next Step. No row is left empty.
func TestTransitionTableCannotBeChanged(t *testing.T) {
	table := transitionTable()
	for i, tr := range table {
		assert.NotEqual(t, transition{}, tr, "row %d is empty", i)
	}
	table[0].to = Paused
	table[0].effects[0] = EffectEscalate
	_, effects, err := Step(State{}, Event{Kind: EventIdle, At: t0}, 1)
	require.NoError(t, err)
	effects[0] = EffectResume

	got, effects, err := Step(State{}, Event{Kind: EventIdle, At: t0}, 1)
	require.NoError(t, err)
	assert.Equal(t, Suspicious, got.Phase)
	assert.Equal(t, []Effect{EffectSendProbe}, effects)
}

// The protocol's sequences end to end: idle, probe, idle again, resume; and a
// second crash that exhausts the budget.
func TestStepCrashBudget(t *testing.T) {
	tests := []struct {
		budget int
		want   []Phase // the phase after each confirmed crash
	}{
		{0, []Phase{Paused}},
		{1, []Phase{Resuming, Paused}},
		{2, []Phase{Resuming, Resuming, Paused}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("budget %d", tt.budget), func(t *testing.T) {
			s := State{}
			step := func(k EventKind) {
				t.Helper()
				var err error
				s, _, err = Step(s, Event{Kind: k, At: t0}, tt.budget)
				require.NoError(t, err)
			}
			for i, want := range tt.want {
				step(EventIdle)
				step(EventProbeSent)
				step(EventIdle)
				if s.Phase == CheckingItem {
					step(EventItemOpen)
				}
				assert.Equal(t, want, s.Phase, "crash %d", i+1)
				if s.Phase == Resuming {
					step(EventResumed)
				}
			}
			assert.Equal(t, len(tt.want), s.Crashes)
			assert.Equal(t, len(tt.want), s.Probes)
			assert.Equal(t, ReasonCrashBudgetExhausted, s.PauseReason)
		})
	}
}

func TestProtocolNames(t *testing.T) {
	for p := Phase(0); p < numPhases; p++ {
		assert.NotContains(t, p.String(), "Phase(")
	}
	for e := EventKind(0); e < numEventKinds; e++ {
		assert.NotContains(t, e.String(), "EventKind(")
	}
	for e := EffectSendProbe; e <= EffectSynthesizeCompletion; e++ {
		assert.NotContains(t, e.String(), "Effect(")
	}
	assert.Equal(t, "Phase(99)", Phase(99).String())
	assert.Equal(t, "EventKind(99)", EventKind(99).String())
	assert.Equal(t, "Effect(0)", Effect(0).String())
	assert.Equal(t, "PauseReason(9)", PauseReason(9).String())
	assert.Equal(t, "resume failed", ReasonResumeFailed.String())
	assert.Equal(t, "DeadlineKind(7)", DeadlineKind(7).String())
	assert.Equal(t, "attempt", Attempt.String())
}
