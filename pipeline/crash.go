package pipeline

import (
	"time"

	"github.com/agentforeman/foreman/health"
)

// The handlers of a worker's health, from Flow.Step once the guards have
// passed: a status reply that answers a probe or a suspicion, a message
// that cannot be parsed (probed once, then paused), and the crash-detection
// protocol for an idle worker and a probe that timed out.

func (f *Flow) statusReply(s State, now time.Time) (State, []Effect, error) {
	if s.Unparsed == 0 && s.Crash.Phase != health.Suspicious && s.Crash.Phase != health.Probing {
		return s, nil, nil // an answer nobody waits for
	}
	next := s
	next.Unparsed = 0
	next.Updated = now
	next.Steps++
	if s.Crash.Phase == health.Suspicious || s.Crash.Phase == health.Probing {
		hs, _, err := health.Step(s.Crash, health.Event{Kind: health.EventStatusReply, At: now}, f.CrashBudget)
		if err != nil {
			return s, nil, err
		}
		next.Crash = hs
	}
	return next, nil, nil
}

func (f *Flow) unparseable(s State, ev *Event, now time.Time) (State, []Effect, error) {
	effects := 1 // the probe
	if s.Unparsed > 0 {
		effects = s.pauseEffects(true)
	}
	var t transition
	f.begin(&t, &s, now, s.Unparsed > 0, effects)
	t.s.Unparsed++
	if t.s.Unparsed == 1 {
		t.add(Effect{Kind: EffectProbe, Worker: s.Worker, Assignment: s.Assignment, Stage: s.Stage})
		return t.done()
	}
	v := vars{s: &t.s, ev: ev, stage: s.Stage}
	t.s.Stages[s.Stage].Result = expand("UNPARSEABLE: {detail}", v)
	t.pause(ReasonUnparseable, expand(f.UnparseableEscalate, v),
		"read the worker's raw messages; fix its prompt or answer it, then resolve the item", true, 0, now)
	return t.done()
}

// crashStep runs the crash-detection protocol (health.Step) and follows it
// through the steps the coordinator answers itself: the probe is sent by an
// effect, the item is open because it is ACTIVE, and a resume is a fresh
// worker spawned by an effect. Probe timeouts are the host's to report
// (EventProbeTimeout), for instance from health.Deadlines.
func (f *Flow) crashStep(s State, kind health.EventKind, now time.Time) (State, []Effect, error) {
	hs, heffs, err := health.Step(s.Crash, health.Event{Kind: kind, At: now}, f.CrashBudget)
	if err != nil {
		return s, nil, err
	}
	var t transition
	f.begin(&t, &s, now, true, 4) // a probe, a resume (2) or a pause (3 or 4)
	t.s.Crash = hs
	for len(heffs) > 0 {
		he := heffs[0]
		heffs = heffs[1:]
		var follow health.EventKind
		switch he {
		case health.EffectSendProbe:
			t.add(Effect{Kind: EffectProbe, Worker: s.Worker, Assignment: s.Assignment, Stage: s.Stage})
			follow = health.EventProbeSent
		case health.EffectCheckItemOpen:
			follow = health.EventItemOpen
		case health.EffectResume:
			t.add(Effect{Kind: EffectShutdown, Worker: s.Worker, Assignment: s.Assignment, Stage: s.Stage})
			t.assign(s.Stage, f.CrashWorker, true, now)
			// assign reset the protocol to Working for the new assignment.
			continue
		case health.EffectEscalate:
			v := vars{s: &t.s, stage: s.Stage, n: t.s.Crash.Crashes}
			t.s.Stages[s.Stage].Result = expand(f.CrashResult, v)
			t.pause(ReasonCrashed, expand(f.CrashEscalate, v),
				"look at why the worker keeps crashing (its log, the checkpoint), then resolve the item", true, f.CrashBudget, now)
			continue
		default: // timers are the host's; nothing else applies to an open item
			continue
		}
		next, more, err := health.Step(t.s.Crash, health.Event{Kind: follow, At: now}, f.CrashBudget)
		if err != nil {
			return s, nil, err
		}
		t.s.Crash = next
		heffs = append(heffs, more...)
	}
	return t.done()
}
