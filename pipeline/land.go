package pipeline

import "time"

// landRejected applies a Lander's feedback to a MERGING item: the rule of
// the stage it merged from, for ev.Outcome, as if that stage had reported
// it (its worker is gone: no ACK, the shutdown is a harmless repeat). Only
// a rule that sends the item back to work (Retry, Rework) or pauses it
// applies; its failures count against the same limit as the stage's own,
// so a failing check takes one of the quality cycles.
func (f *Flow) landRejected(t *transition, s *State, ev *Event, now time.Time) error {
	r, ok := f.rule(s.Stage, ev.Outcome)
	if !ok || (r.Action != Retry && r.Action != Rework && r.Action != Pause) {
		return &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind, Stage: s.Stage, Outcome: ev.Outcome}
	}
	merging := *s
	merging.Status = StatusActive
	t.begin(f, &merging, now, true, r.effects(&merging, ""))
	stage := s.Stage
	rec := &t.s.Stages[stage]
	rec.End = now
	v := vars{s: &t.s, ev: ev, stage: stage}
	if r.Action == Pause {
		t.setResult(stage, "LANDING REFUSED: {detail}", &v)
		t.pause(ReasonStageError, expand("Story {id} could not land: {detail}", &v), r.Suggest, true, 0, now)
		return nil
	}
	rec.Failures++
	v.n = rec.Failures
	within := rec.Failures <= r.Limit
	if r.Action == Rework {
		within = rec.Failures < r.Limit
	}
	if !within {
		t.setResult(stage, r.Exhausted, &v)
		t.pause(ReasonRetriesExhausted, expand(r.Escalate, &v)+": "+ev.Detail, r.Suggest, true, r.Limit, now)
		return nil
	}
	t.setResult(stage, "LANDING REFUSED: {detail}", &v)
	t.s.Feedback = ev.Detail
	target := stage
	if r.Action == Rework {
		target = r.Target
		t.s.Stages[target].Start, t.s.Stages[target].End = now, time.Time{}
	}
	t.send(EffectShutdown, stage, s.Worker, s.Assignment)
	t.assign(target, r.Worker, &v, false, now)
	return nil
}
