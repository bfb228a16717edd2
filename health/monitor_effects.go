package health

import (
	"context"
	"errors"
	"fmt"
)

// execute carries out one effect for w (whose lock is held). It returns the
// follow-up event the effect produced, if any. An error means the effect
// did not happen and must stay pending: the context is done, or the host
// refused an escalation or a completion. A service failure on a question
// (probe, item check, resume) is not an error but the protocol's failure
// event.
func (m *Monitor) execute(ctx context.Context, w *watch, e Effect, tr *Transition) (EventKind, bool, error) {
	switch e {
	case EffectSendProbe:
		err := m.cfg.Prober.Probe(ctx, Probe{Item: w.sub.Item, Stage: w.sub.Stage, Assignment: w.sub.Assignment,
			Worker: w.sub.Worker, Text: ProbeText(w.sub.Item, w.sub.Stage)})
		return m.answer(ctx, w, "probe", err, EventProbeSent, EventProbeFailed)

	case EffectArmProbeTimeout:
		m.stopTimer(w)
		id := w.timerID
		w.timer = m.clk.AfterFunc(m.cfg.ProbeTimeout, func() { m.onProbeTimeout(w, id) })
		return 0, false, nil

	case EffectCancelProbeTimeout:
		m.stopTimer(w)
		return 0, false, nil

	case EffectCheckItemOpen:
		open, err := m.cfg.ItemChecker.ItemOpen(ctx, w.sub.Item)
		if err == nil && !open {
			return EventItemClosed, true, nil
		}
		return m.answer(ctx, w, "item open check", err, EventItemOpen, EventItemCheckFailed)

	case EffectResume:
		return m.resume(ctx, w, tr)

	case EffectEscalate:
		esc := m.escalation(w)
		if err := m.cfg.Escalator.Escalate(ctx, esc); err != nil {
			return 0, false, fmt.Errorf("health: escalate %s: %w", w.sub.Item, err)
		}
		m.log.Warn("health: item paused", "item", esc.Item, "stage", esc.Stage, "reason", esc.Reason, "crashes", esc.Crashes)
		tr.Escalation = &esc
		w.out.Escalation = &esc
		return 0, false, nil

	case EffectReportClosed:
		m.log.Info("health: crashed assignment not resumed: item is closed", "item", w.sub.Item, "assignment", w.sub.Assignment)
		return 0, false, nil

	case EffectSynthesizeCompletion:
		if w.synth == nil {
			return 0, false, fmt.Errorf("health: no synthesized completion prepared for %s", w.sub.Item)
		}
		if err := m.cfg.Completer.CompleteFromCheckpoint(ctx, *w.synth); err != nil {
			return 0, false, fmt.Errorf("health: complete %s from checkpoint: %w", w.sub.Item, err)
		}
		m.log.Info("health: lost completion synthesized from checkpoint", "item", w.sub.Item, "stage", w.sub.Stage)
		tr.Completion = w.synth
		w.out.Completion = w.synth
		return 0, false, nil
	}
	return 0, false, fmt.Errorf("health: unknown effect %s", e)
}

// answer maps a service call's error to the success or failure event; a
// done context is an error, so that the effect stays pending.
func (m *Monitor) answer(ctx context.Context, w *watch, what string, err error, ok, failed EventKind) (EventKind, bool, error) {
	if err == nil {
		return ok, true, nil
	}
	if ctx.Err() != nil {
		return 0, false, ctx.Err()
	}
	w.failure = fmt.Sprintf("%s: %v", what, err)
	m.log.Warn("health: "+what+" failed", "item", w.sub.Item, "assignment", w.sub.Assignment, "err", err)
	return failed, true, nil
}

// resume plans from the checkpoint, tries the agent's own session first and
// a fresh worker second, and moves the watch to the new assignment.
func (m *Monitor) resume(ctx context.Context, w *watch, tr *Transition) (EventKind, bool, error) {
	plan := ResumePlan{Item: w.sub.Item, Stage: w.sub.Stage, PreviousAssignment: w.sub.Assignment,
		PreviousWorker: w.sub.Worker, Mode: ResumeFresh, Crashes: w.state.Crashes}
	cp, err := m.cfg.Checkpoints.LoadCheckpoint(ctx, w.sub.Item)
	switch {
	case err == nil && cp.Stage == w.sub.Stage:
		plan.Checkpoint = &cp
		plan.Prompt = RenderResume(cp)
		if cp.AgentSession != "" {
			plan.Mode, plan.Session = ResumeSession, cp.AgentSession
		}
	case err == nil:
		// A checkpoint of an earlier stage says nothing about this one.
		m.log.Info("health: checkpoint is for another stage; resuming fresh", "item", w.sub.Item, "checkpoint_stage", cp.Stage, "stage", w.sub.Stage)
	case errors.Is(err, ErrNoCheckpoint):
	default:
		// Corrupt, future-version or unreadable: resuming without it would
		// redo finished work blindly, so a person decides.
		return m.answer(ctx, w, "load checkpoint", err, EventResumed, EventResumeFailed)
	}
	resumed, err := m.cfg.Resumer.Resume(ctx, plan)
	if err != nil && plan.Mode == ResumeSession && ctx.Err() == nil {
		m.log.Warn("health: session resume failed; starting a fresh worker", "item", w.sub.Item, "err", err)
		plan.Mode, plan.Session = ResumeFresh, ""
		resumed, err = m.cfg.Resumer.Resume(ctx, plan)
	}
	if err == nil {
		if resumed.Mode == 0 {
			resumed.Mode = plan.Mode
		}
		err = m.takeOver(w, resumed)
	}
	if err != nil {
		return m.answer(ctx, w, "resume", err, EventResumed, EventResumeFailed)
	}
	tr.Resumed = &resumed
	w.out.Resumed = &resumed
	return EventResumed, true, nil
}

// takeOver re-keys the watch to the assignment that resumed the item.
func (m *Monitor) takeOver(w *watch, r Resumed) error {
	if err := r.Assignment.Validate(); err != nil {
		return fmt.Errorf("resumer returned %w", err)
	}
	if r.Worker != "" {
		if err := r.Worker.Validate(); err != nil {
			return fmt.Errorf("resumer returned %w", err)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if other, ok := m.byAssignment[r.Assignment]; ok && other != w {
		return fmt.Errorf("resumer returned assignment %s, which is already watched", r.Assignment)
	}
	delete(m.byAssignment, w.sub.Assignment)
	m.byAssignment[r.Assignment] = w
	w.sub.Assignment, w.sub.Worker = r.Assignment, r.Worker
	return nil
}

// checkDoneMarker looks for a lost completion: a done marker on the
// watched assignment. found is false when there is none to act on.
func (m *Monitor) checkDoneMarker(ctx context.Context, w *watch) (EventKind, bool, error) {
	if m.cfg.DoneMarkers == nil || w.state.Phase.Terminal() || w.state.Phase > Probing {
		return 0, false, nil
	}
	exists, err := m.cfg.DoneMarkers.DoneMarkerExists(ctx, w.sub)
	if err != nil {
		if ctx.Err() != nil {
			return 0, false, ctx.Err()
		}
		m.log.Warn("health: done marker check failed", "item", w.sub.Item, "err", err)
		return 0, false, nil
	}
	if !exists {
		return 0, false, nil
	}
	if m.cfg.DisableLostCompletionSynthesis {
		return EventDoneMarkerUnconfirmed, true, nil
	}
	cp, err := m.cfg.Checkpoints.LoadCheckpoint(ctx, w.sub.Item)
	if err != nil && ctx.Err() != nil {
		return 0, false, ctx.Err()
	}
	if err != nil || cp.Stage != w.sub.Stage || (cp.Assignment != "" && cp.Assignment != w.sub.Assignment) {
		m.log.Warn("health: done marker without a confirming checkpoint; probing", "item", w.sub.Item, "err", err)
		return EventDoneMarkerUnconfirmed, true, nil
	}
	w.synth = &SynthesizedCompletion{Item: w.sub.Item, Stage: w.sub.Stage, Assignment: w.sub.Assignment,
		Worker: w.sub.Worker, Checkpoint: cp}
	return EventDoneMarker, true, nil
}

// escalation builds the actionable escalation for w's pause reason.
func (m *Monitor) escalation(w *watch) Escalation {
	s := w.state
	e := Escalation{Item: w.sub.Item, Stage: w.sub.Stage, Assignment: w.sub.Assignment, Worker: w.sub.Worker,
		Reason: s.PauseReason, Detail: w.failure, Crashes: s.Crashes, CrashBudget: m.budget, Probes: s.Probes,
		At: m.clk.Now()}
	switch s.PauseReason {
	case ReasonCrashBudgetExhausted:
		e.Message = fmt.Sprintf("Item %s: worker crashed %d time(s) at stage %d; crash budget is %d.", e.Item, e.Crashes, e.Stage, e.CrashBudget)
		e.SuggestedAction = "Read the worker's last output and the item's checkpoint to find why it keeps dying " +
			"(context overflow, a hanging tool, a broken environment); fix that, then resume the item or reassign it."
	case ReasonItemCheckFailed:
		e.Message = fmt.Sprintf("Item %s: worker crashed at stage %d, and whether the item is still open could not be checked.", e.Item, e.Stage)
		e.SuggestedAction = "Check the item's status in the tracker. If it is still open, resume it; " +
			"if it is closed, drop the assignment (resuming closed work produces duplicate merges)."
	case ReasonResumeFailed:
		e.Message = fmt.Sprintf("Item %s: worker crashed at stage %d and could not be resumed.", e.Item, e.Stage)
		e.SuggestedAction = "See Detail. If the checkpoint is corrupt or from a newer version it was kept as it was: " +
			"inspect, repair or remove it, then resume the item; otherwise fix the agent runtime and resume."
	}
	return e
}
