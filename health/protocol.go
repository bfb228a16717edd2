package health

import (
	"errors"
	"fmt"
	"time"
)

// The crash-detection protocol as a pure state machine: Step maps a state
// and an event to the next state and the effects the runtime must carry
// out. It does no I/O and reads no clock; time arrives in the event.
// Monitor is the runtime that drives it.

// Phase is where one watched assignment stands in the protocol.
type Phase uint8

const (
	// Working: nothing suspicious; the worker is presumed busy.
	Working Phase = iota
	// Suspicious: the worker went idle without reporting completion; a
	// status probe is due.
	Suspicious
	// Probing: a status probe was sent; a parseable reply clears suspicion,
	// a second idle or the probe timeout confirms a crash.
	Probing
	// CheckingItem: a crash was confirmed within the crash budget; before
	// resuming, the item must be confirmed still open.
	CheckingItem
	// Resuming: the item is open; the assignment is being resumed.
	Resuming
	// Completed: the worker's completion arrived, or a lost one was
	// synthesized from the checkpoint. Terminal.
	Completed
	// Closed: the item was closed meanwhile; nothing is resumed. Terminal.
	Closed
	// Paused: the item needs a person; an escalation was raised. Terminal.
	Paused
	numPhases
)

var phaseNames = [numPhases]string{"working", "suspicious", "probing", "checking-item", "resuming", "completed", "closed", "paused"}

func (p Phase) String() string {
	if p < numPhases {
		return phaseNames[p]
	}
	return fmt.Sprintf("Phase(%d)", uint8(p))
}

// Terminal reports whether no event leaves p.
func (p Phase) Terminal() bool { return p == Completed || p == Closed || p == Paused }

// EventKind is something that happened to a watched assignment.
type EventKind uint8

const (
	// EventIdle: the worker went idle (or fell silent) without a completion.
	EventIdle EventKind = iota
	// EventProbeSent: the status probe was delivered to the worker.
	EventProbeSent
	// EventProbeFailed: the probe could not be delivered; the worker is gone.
	EventProbeFailed
	// EventStatusReply: the worker answered with a parseable status.
	EventStatusReply
	// EventProbeTimeout: no reply within the probe timeout.
	EventProbeTimeout
	// EventCompleted: the worker's completion was received and processed.
	EventCompleted
	// EventDoneMarker: the worker's done marker exists but the completion was
	// never processed, and the checkpoint confirms the stage: a lost
	// completion, to be synthesized.
	EventDoneMarker
	// EventDoneMarkerUnconfirmed: a done marker exists but no usable
	// checkpoint confirms it; fall back to probing.
	EventDoneMarkerUnconfirmed
	// EventItemOpen: the item is still open; resuming is safe.
	EventItemOpen
	// EventItemClosed: the item was closed meanwhile; resuming would redo
	// finished work (a duplicate merge, once).
	EventItemClosed
	// EventItemCheckFailed: whether the item is open could not be determined.
	EventItemCheckFailed
	// EventResumed: the assignment was resumed (own session or fresh worker).
	EventResumed
	// EventResumeFailed: the assignment could not be resumed.
	EventResumeFailed
	numEventKinds
)

var eventNames = [numEventKinds]string{"idle", "probe-sent", "probe-failed", "status-reply", "probe-timeout",
	"completed", "done-marker", "done-marker-unconfirmed", "item-open", "item-closed", "item-check-failed",
	"resumed", "resume-failed"}

func (k EventKind) String() string {
	if k < numEventKinds {
		return eventNames[k]
	}
	return fmt.Sprintf("EventKind(%d)", uint8(k))
}

// Event is one input to Step.
type Event struct {
	Kind EventKind
	At   time.Time
}

// Effect is something Step asks the runtime to do, in order.
type Effect uint8

const (
	// EffectSendProbe: send the status probe; report EventProbeSent or
	// EventProbeFailed.
	EffectSendProbe Effect = iota + 1
	// EffectArmProbeTimeout: start the probe timer; on expiry report
	// EventProbeTimeout.
	EffectArmProbeTimeout
	// EffectCancelProbeTimeout: stop the probe timer.
	EffectCancelProbeTimeout
	// EffectCheckItemOpen: ask whether the item is still open; report
	// EventItemOpen, EventItemClosed or EventItemCheckFailed.
	EffectCheckItemOpen
	// EffectResume: resume from the checkpoint; report EventResumed or
	// EventResumeFailed.
	EffectResume
	// EffectEscalate: raise an escalation with State.PauseReason.
	EffectEscalate
	// EffectReportClosed: report that a crashed assignment was not resumed
	// because its item is closed.
	EffectReportClosed
	// EffectSynthesizeCompletion: hand the completion, rebuilt from the
	// checkpoint, to the host.
	EffectSynthesizeCompletion
)

var effectNames = [...]string{"", "send-probe", "arm-probe-timeout", "cancel-probe-timeout", "check-item-open",
	"resume", "escalate", "report-closed", "synthesize-completion"}

func (e Effect) String() string {
	if int(e) < len(effectNames) && e != 0 {
		return effectNames[e]
	}
	return fmt.Sprintf("Effect(%d)", uint8(e))
}

// PauseReason says why an assignment was paused.
type PauseReason uint8

const (
	NoPause PauseReason = iota
	// ReasonCrashBudgetExhausted: the worker crashed more often than the
	// crash budget allows.
	ReasonCrashBudgetExhausted
	// ReasonItemCheckFailed: whether the item is open could not be checked,
	// and resuming closed work is worse than waiting for a person.
	ReasonItemCheckFailed
	// ReasonResumeFailed: the resume itself failed (or the checkpoint is
	// unusable).
	ReasonResumeFailed
)

func (r PauseReason) String() string {
	switch r {
	case NoPause:
		return "none"
	case ReasonCrashBudgetExhausted:
		return "crash budget exhausted"
	case ReasonItemCheckFailed:
		return "item open check failed"
	case ReasonResumeFailed:
		return "resume failed"
	}
	return fmt.Sprintf("PauseReason(%d)", uint8(r))
}

// State is the protocol state of one watched item. Counters survive
// resumes, so a resumed worker that crashes again counts against the same
// budget.
type State struct {
	Phase       Phase
	Crashes     int // confirmed crashes so far
	Probes      int // probes sent so far
	Since       time.Time
	PauseReason PauseReason
}

// ErrInvalidTransition is matched by every *TransitionError.
var ErrInvalidTransition = errors.New("health: invalid transition")

// TransitionError is an event that is not defined in the current phase.
type TransitionError struct {
	Phase Phase
	Event EventKind
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("health: no transition for event %s in phase %s", e.Event, e.Phase)
}

// Is matches ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

type guard uint8

const (
	always guard = iota
	withinBudget
	overBudget
)

// transition is one row of the table. A crash row counts a confirmed crash
// before its guard is evaluated.
type transition struct {
	from    Phase
	on      EventKind
	when    guard
	crash   bool
	to      Phase
	reason  PauseReason
	effects effectList
}

// maxEffects is the most effects one transition asks for.
const maxEffects = 2

// effectList holds a row's effects in order; the zero Effect ends it. An
// array rather than a slice, so that a copy of the table shares nothing.
type effectList [maxEffects]Effect

// slice returns the effects as a new slice, nil when there are none.
func (l effectList) slice() []Effect {
	var out []Effect
	for _, e := range l {
		if e == 0 {
			break
		}
		out = append(out, e)
	}
	return out
}

// transitionCount is the number of rows of the table; a test checks that
// none is left empty.
const transitionCount = 25

// transitionTable is the whole protocol, returned by value (an array, no
// slices inside) so that nobody can change it. Rows with the same
// (from, on) differ only in their guard; exactly one guard holds.
func transitionTable() [transitionCount]transition {
	return [transitionCount]transition{
		{from: Working, on: EventIdle, to: Suspicious, effects: effectList{EffectSendProbe}},
		{from: Working, on: EventStatusReply, to: Working},
		{from: Working, on: EventCompleted, to: Completed},
		{from: Working, on: EventDoneMarker, to: Completed, effects: effectList{EffectSynthesizeCompletion}},
		{from: Working, on: EventDoneMarkerUnconfirmed, to: Suspicious, effects: effectList{EffectSendProbe}},

		// Idle again before the probe went out (a cancelled call): probe again.
		{from: Suspicious, on: EventIdle, to: Suspicious, effects: effectList{EffectSendProbe}},
		{from: Suspicious, on: EventProbeSent, to: Probing, effects: effectList{EffectArmProbeTimeout}},
		{from: Suspicious, on: EventProbeFailed, when: withinBudget, crash: true, to: CheckingItem, effects: effectList{EffectCheckItemOpen}},
		{from: Suspicious, on: EventProbeFailed, when: overBudget, crash: true, to: Paused, reason: ReasonCrashBudgetExhausted, effects: effectList{EffectEscalate}},
		{from: Suspicious, on: EventStatusReply, to: Working},
		{from: Suspicious, on: EventCompleted, to: Completed},
		{from: Suspicious, on: EventDoneMarker, to: Completed, effects: effectList{EffectSynthesizeCompletion}},

		{from: Probing, on: EventStatusReply, to: Working, effects: effectList{EffectCancelProbeTimeout}},
		{from: Probing, on: EventIdle, when: withinBudget, crash: true, to: CheckingItem, effects: effectList{EffectCancelProbeTimeout, EffectCheckItemOpen}},
		{from: Probing, on: EventIdle, when: overBudget, crash: true, to: Paused, reason: ReasonCrashBudgetExhausted, effects: effectList{EffectCancelProbeTimeout, EffectEscalate}},
		{from: Probing, on: EventProbeTimeout, when: withinBudget, crash: true, to: CheckingItem, effects: effectList{EffectCheckItemOpen}},
		{from: Probing, on: EventProbeTimeout, when: overBudget, crash: true, to: Paused, reason: ReasonCrashBudgetExhausted, effects: effectList{EffectEscalate}},
		{from: Probing, on: EventCompleted, to: Completed, effects: effectList{EffectCancelProbeTimeout}},
		{from: Probing, on: EventDoneMarker, to: Completed, effects: effectList{EffectCancelProbeTimeout, EffectSynthesizeCompletion}},
		// Already probing: the reply, or its absence, decides.
		{from: Probing, on: EventDoneMarkerUnconfirmed, to: Probing},

		{from: CheckingItem, on: EventItemOpen, to: Resuming, effects: effectList{EffectResume}},
		{from: CheckingItem, on: EventItemClosed, to: Closed, effects: effectList{EffectReportClosed}},
		{from: CheckingItem, on: EventItemCheckFailed, to: Paused, reason: ReasonItemCheckFailed, effects: effectList{EffectEscalate}},

		{from: Resuming, on: EventResumed, to: Working},
		{from: Resuming, on: EventResumeFailed, to: Paused, reason: ReasonResumeFailed, effects: effectList{EffectEscalate}},
	}
}

// Step applies ev to s. crashBudget is how many confirmed crashes are
// resumed; the next one pauses. An event not defined in s.Phase returns s
// unchanged and a *TransitionError.
func Step(s State, ev Event, crashBudget int) (State, []Effect, error) {
	table := transitionTable()
	for i := range table {
		tr := &table[i]
		if tr.from != s.Phase || tr.on != ev.Kind {
			continue
		}
		next := s
		if tr.crash {
			next.Crashes++
		}
		switch tr.when {
		case withinBudget:
			if next.Crashes > crashBudget {
				continue
			}
		case overBudget:
			if next.Crashes <= crashBudget {
				continue
			}
		}
		if tr.to != s.Phase {
			next.Since = ev.At
		}
		next.Phase = tr.to
		next.PauseReason = tr.reason
		effects := tr.effects.slice()
		for _, e := range effects {
			if e == EffectSendProbe {
				next.Probes++
			}
		}
		return next, effects, nil
	}
	return s, nil, &TransitionError{Phase: s.Phase, Event: ev.Kind}
}
