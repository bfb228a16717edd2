package pipeline

import (
	"time"

	"github.com/agentforeman/foreman/health"
)

// The handlers of a worker's health, from Flow.Step once the guards have
// passed: a status reply that answers a probe or a suspicion, a message
// that cannot be parsed (probed once, then paused), and the crash-detection
// protocol for an idle worker and a probe that timed out.

// statusReply is an answer to a probe or to unparseable messages (Step
// drops the answers nobody waits for).
func (f *Flow) statusReply(t *transition, s *State, now time.Time) error {
	t.begin(f, s, now, false, 0)
	t.s.Unparsed = 0
	if s.Crash.Phase == health.Suspicious || s.Crash.Phase == health.Probing {
		hs, _, err := health.Step(s.Crash, health.Event{Kind: health.EventStatusReply, At: now}, f.CrashBudget)
		if err != nil {
			return err
		}
		t.s.Crash = hs
	}
	return nil
}

func (f *Flow) unparseable(t *transition, s *State, ev *Event, now time.Time) error {
	effects := 1 // the probe
	if s.Unparsed > 0 {
		effects = s.pauseEffects(true)
	}
	t.begin(f, s, now, s.Unparsed > 0, effects)
	t.s.Unparsed++
	if t.s.Unparsed == 1 {
		t.send(EffectProbe, s.Stage, s.Worker, s.Assignment)
		return nil
	}
	v := vars{s: &t.s, ev: ev, stage: s.Stage}
	t.setResult(s.Stage, "UNPARSEABLE: {detail}", &v)
	t.pause(ReasonUnparseable, expand(f.UnparseableEscalate, &v),
		"read the worker's raw messages; fix its prompt or answer it, then resolve the item", true, 0, now)
	return nil
}

// crashStep runs the crash-detection protocol (health.Step) and follows it
// through the steps the coordinator answers itself: the probe is sent by an
// effect, the item is open because it is ACTIVE, and a resume is a fresh
// worker spawned by an effect. Probe timeouts are the host's to report
// (EventProbeTimeout), for instance from health.Deadlines.
func (f *Flow) crashStep(t *transition, s *State, kind health.EventKind, now time.Time) error {
	hs, heffs, err := health.Step(s.Crash, health.Event{Kind: kind, At: now}, f.CrashBudget)
	if err != nil {
		return err
	}
	t.begin(f, s, now, true, 4) // a probe, a resume (2) or a pause (3 or 4)
	t.s.Crash = hs
	for len(heffs) > 0 {
		he := heffs[0]
		heffs = heffs[1:]
		var follow health.EventKind
		switch he {
		case health.EffectSendProbe:
			t.send(EffectProbe, s.Stage, s.Worker, s.Assignment)
			follow = health.EventProbeSent
		case health.EffectCheckItemOpen:
			follow = health.EventItemOpen
		case health.EffectResume:
			t.send(EffectShutdown, s.Stage, s.Worker, s.Assignment)
			t.assign(s.Stage, f.CrashWorker, nil, true, now)
			// assign reset the protocol to Working for the new assignment.
			continue
		case health.EffectEscalate:
			v := vars{s: &t.s, stage: s.Stage, n: t.s.Crash.Crashes}
			t.setResult(s.Stage, f.CrashResult, &v)
			t.pause(ReasonCrashed, expand(f.CrashEscalate, &v),
				"look at why the worker keeps crashing (its log, the checkpoint), then resolve the item", true, f.CrashBudget, now)
			continue
		default: // timers are the host's; nothing else applies to an open item
			continue
		}
		next, more, err := health.Step(t.s.Crash, health.Event{Kind: follow, At: now}, f.CrashBudget)
		if err != nil {
			return err
		}
		t.s.Crash = next
		heffs = append(heffs, more...)
	}
	return nil
}
