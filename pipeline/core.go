package pipeline

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/mutant"
)

// ErrInvalidTransition is matched by *TransitionError.
var ErrInvalidTransition = errors.New("pipeline: invalid transition")

// TransitionError is an event that is not defined for the item's status, or
// a report whose outcome the stage's table does not define. The state is
// unchanged.
type TransitionError struct {
	Item    foreman.ItemID
	Status  Status
	Event   EventKind
	Stage   int
	Outcome Outcome
}

func (e *TransitionError) Error() string {
	if e.Event == EventReport {
		return fmt.Sprintf("pipeline: item %s: no rule for Stage %d %s (status %s)", e.Item, e.Stage, e.Outcome, e.Status)
	}
	return fmt.Sprintf("pipeline: item %s: event %s not defined in status %s", e.Item, e.Event, e.Status)
}

// Is matches ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }

// handler is a cell of the status × event table.
type handler uint8

const (
	invalid handler = iota
	onStart
	onReport
	onStatusReply
	onIdle
	onProbeTimeout
	onUnparseable
	onMerged
	onMergeConflict
	onMergeFailed
	onResolve
	// onLateReport: a report after the item left its stages: fenced, then
	// re-ACKed as a duplicate.
	onLateReport
	// onIgnore: a worker event with nothing left to do (an idle after the
	// last report); fenced, then ignored.
	onIgnore
	// onLandRejected: a lander's feedback on a merging item (land.go).
	onLandRejected
)

// table is the whole item lifecycle: every (status, event) pair not listed
// is a *TransitionError. Stage outcomes are the flow's own tables (Rule).
var table = [numStatuses][numEventKinds]handler{
	StatusNew: {EventStart: onStart},
	StatusActive: {EventReport: onReport, EventStatusReply: onStatusReply, EventIdle: onIdle,
		EventProbeTimeout: onProbeTimeout, EventUnparseable: onUnparseable},
	StatusMerging: {EventReport: onLateReport, EventStatusReply: onIgnore, EventIdle: onIgnore,
		EventProbeTimeout: onIgnore, EventUnparseable: onIgnore,
		EventMerged: onMerged, EventMergeConflict: onMergeConflict, EventMergeFailed: onMergeFailed,
		EventLandRejected: onLandRejected},
	StatusDone: {EventReport: onLateReport, EventStatusReply: onIgnore, EventIdle: onIgnore,
		EventProbeTimeout: onIgnore, EventUnparseable: onIgnore},
	StatusPaused: {EventReport: onLateReport, EventStatusReply: onIgnore, EventIdle: onIgnore,
		EventProbeTimeout: onIgnore, EventUnparseable: onIgnore, EventResolve: onResolve},
}

// sender is what the guards make of a worker event's sender.
type sender uint8

const (
	fromCurrent  sender = iota // the item's current assignment
	fromLast                   // the assignment whose report moved the item last
	fromStranger               // anyone else: stale
)

// An empty assignment id matches only an assignment that has none (a record
// from before assignments were issued): worker names are reused (a second
// story-{id}-s3 after a rework, a retry after a resolve), so a name alone
// cannot tell a late report of an earlier worker from the current one's.
func (s *State) sender(ev *Event) sender {
	match := func(w foreman.WorkerID, a foreman.AssignmentID) bool {
		return w != "" && ev.Worker == w && ev.Assignment == a
	}
	switch {
	case match(s.Worker, s.Assignment):
		return fromCurrent
	case match(s.Last.Worker, s.Last.Assignment):
		return fromLast
	}
	return fromStranger
}

// Step applies ev to s at now and returns the new state and the effects to
// carry out, in order. It does no I/O and reads no clock. s is not modified.
//
// Worker events pass two guards before any handler: sender validation (the
// sender must hold the item's current assignment, by worker name and
// assignment id: anything else is stale, counted in State.Stale and ignored)
// and the state guard (a report for a stage the item is not in, from its
// current or last worker, is a duplicate: counted in State.Duplicates and
// re-ACKed, never reprocessed).
//
// Step is AppendStep(nil, s, ev, now).
func (f *Flow) Step(s State, ev Event, now time.Time) (State, []Effect, error) {
	return f.AppendStep(nil, s, ev, now)
}

// AppendStep is Step that appends the transition's effects to effects and
// returns the extended slice, as strconv.AppendInt does with bytes: a
// caller that reuses one buffer (AppendStep(buf[:0], ...)) allocates
// nothing for effects once the buffer is large enough (a transition that
// changes a stage still allocates the state's new stage records). The effects are
// numbered (Effect.Index) from 0 within the transition, whatever effects
// held before. A transition without effects, or an error, returns effects
// as given; AppendStep may still have written to its spare capacity.
//
// The new state never shares memory with effects: reusing the buffer
// leaves earlier states intact (an escalation is shared by the state's
// Pause and its Escalate effect, as with Step). With effects nil, the
// effects are a new slice, as from Step.
func (f *Flow) AppendStep(effects []Effect, s State, ev Event, now time.Time) (State, []Effect, error) {
	if s.Status >= numStatuses || ev.Kind == 0 || ev.Kind >= numEventKinds {
		return s, effects, &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind}
	}
	h := table[s.Status][ev.Kind]
	switch h {
	case invalid:
		return s, effects, &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind}
	case onStart, onResolve, onMerged, onMergeConflict, onMergeFailed, onLandRejected:
	default:
		// Worker events: sender validation, then the state guard.
		from := s.sender(&ev)
		if from == fromStranger && mutant.Active(mutant.FenceByName) && ev.Worker != "" && ev.Worker == s.Worker {
			from = fromCurrent // the bug: the worker's name alone, whatever its assignment
		}
		if from == fromStranger || (from == fromLast && ev.Kind != EventReport) {
			if from == fromLast {
				return s, effects, nil // an idle or a late reply from a worker already done: expected
			}
			next := s
			next.Stale++
			next.Updated = now
			return next, effects, nil
		}
		if ev.Kind == EventReport && (from == fromLast || h == onLateReport || ev.Stage != s.Stage) {
			next := s
			next.Duplicates++
			next.Steps++
			next.Updated = now
			if mutant.Active(mutant.NoReAck) {
				return next, effects, nil
			}
			return next, append(effects, Effect{Kind: EffectAck, Item: s.Item, Step: next.Steps, Worker: ev.Worker,
				Assignment: ev.Assignment, Stage: ev.Stage}), nil
		}
		switch h {
		case onStatusReply:
			if ev.Stage != s.Stage {
				return s, effects, nil // an answer about another stage clears nothing
			}
			if s.Unparsed == 0 && s.Crash.Phase != health.Suspicious && s.Crash.Phase != health.Probing {
				return s, effects, nil // an answer nobody waits for
			}
		case onProbeTimeout:
			if s.Crash.Phase != health.Probing && s.Unparsed == 0 {
				return s, effects, nil // a timer that outlived its probe
			}
		case onIgnore:
			return s, effects, nil
		}
	}

	// The handlers build the new state and its effects in t. Passing the
	// states by pointer keeps a transition to two copies of State: s into
	// t.s, t.s out.
	var t transition
	t.effs, t.base = effects, len(effects)
	var err error
	switch h {
	case onStart:
		err = f.start(&t, &s, &ev, now)
	case onResolve:
		err = f.resolve(&t, &s, &ev, now)
	case onMerged, onMergeConflict, onMergeFailed:
		err = f.merged(&t, &s, h, &ev, now)
	case onLandRejected:
		err = f.landRejected(&t, &s, &ev, now)
	case onReport:
		err = f.report(&t, &s, &ev, now)
	case onStatusReply:
		err = f.statusReply(&t, &s, now)
	case onIdle:
		err = f.crashStep(&t, &s, health.EventIdle, now)
	case onProbeTimeout:
		if s.Crash.Phase != health.Probing {
			// The probe of an unparseable message went unanswered: the
			// worker may be gone (its run ended on the garbage), and no
			// second message will come. The crash protocol takes over, as
			// for a worker gone idle: it probes once more and, unanswered,
			// resumes the stage with a fresh worker within the crash budget.
			err = f.crashStep(&t, &s, health.EventIdle, now)
			break
		}
		err = f.crashStep(&t, &s, health.EventProbeTimeout, now)
	case onUnparseable:
		err = f.unparseable(&t, &s, &ev, now)
	default:
		return s, effects, nil
	}
	if err != nil {
		return s, effects, err
	}
	t.flush()
	return t.s, t.effs, nil
}

func (f *Flow) start(t *transition, s *State, ev *Event, now time.Time) error {
	if err := s.Item.Validate(); err != nil {
		return err
	}
	if ev.Stage < 0 || ev.Stage >= len(f.Stages) {
		return &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind, Stage: ev.Stage}
	}
	fresh := State{Item: s.Item, Title: ev.Title, Steps: s.Steps, Started: now}
	t.begin(f, &fresh, now, true, 2)
	t.s.Stages[ev.Stage].Start = now
	t.s.Worktree = true
	t.add(EffectCreateWorktree, 0)
	t.assign(ev.Stage, "", nil, false, now)
	return nil
}

func (f *Flow) resolve(t *transition, s *State, ev *Event, now time.Time) error {
	if ev.Stage < 0 || ev.Stage >= len(f.Stages) {
		return &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind, Stage: ev.Stage}
	}
	t.begin(f, s, now, true, 2)
	// A person intervened: the budgets of the stages ahead start again.
	for i := ev.Stage; i < len(t.s.Stages); i++ {
		t.s.Stages[i].Failures = 0
	}
	t.s.Stages[ev.Stage].Start, t.s.Stages[ev.Stage].End = now, time.Time{}
	t.s.Crash = health.State{}
	t.s.Pause = nil
	t.s.Feedback = ev.Detail
	t.s.Last = Finished{Worker: s.Worker, Assignment: s.Assignment, Stage: s.Stage}
	t.s.Worktree = true
	t.add(EffectCreateWorktree, 0)
	t.assign(ev.Stage, "", nil, false, now)
	return nil
}

func (f *Flow) report(t *transition, s *State, ev *Event, now time.Time) error {
	r, ok := f.rule(s.Stage, ev.Outcome)
	if !ok {
		return &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind, Stage: ev.Stage, Outcome: ev.Outcome}
	}
	if !r.scoreOK(ev.Score) {
		return &ReportError{Item: s.Item, Stage: ev.Stage, Outcome: ev.Outcome, Score: ev.Score, Max: r.MaxScore}
	}
	problem := r.Check.problem(ev.Board)
	t.begin(f, s, now, true, r.effects(s, problem))
	stage := s.Stage
	rec := &t.s.Stages[stage]
	rec.End = now
	t.s.Last = Finished{Worker: s.Worker, Assignment: s.Assignment, Stage: stage}
	// ACK first, always: the worker waits for it before it lets itself be
	// shut down.
	t.send(EffectAck, stage, ev.Worker, ev.Assignment)
	v := vars{s: &t.s, ev: ev, stage: stage}

	if problem != "" {
		v.problem = problem
		t.setResult(stage, "BOARD CHECK FAILED: {problem}", &v)
		t.pause(ReasonBoardCheck, expand("Board check failed for Story {id} after Stage {stage}: {problem}", &v),
			"look at the board and the worker's output; fix the board or the work, then resolve the item", true, 0, now)
		return nil
	}
	switch r.Action {
	case Advance:
		t.setResult(stage, r.Result, &v)
		if r.KeepScore {
			t.s.Readiness = ev.Score
		}
		t.s.Feedback = ""
		t.s.Stages[stage+1].Start = now
		t.send(EffectShutdown, stage, s.Worker, s.Assignment)
		t.assign(stage+1, "", nil, false, now)
	case Retry, Rework:
		rec.Failures++
		v.n = rec.Failures
		within := rec.Failures <= r.Limit
		if r.Action == Rework {
			within = rec.Failures < r.Limit
		}
		if !within {
			t.setResult(stage, r.Exhausted, &v)
			t.pause(ReasonRetriesExhausted, expand(r.Escalate, &v), r.Suggest, true, r.Limit, now)
			return nil
		}
		t.setResult(stage, r.Result, &v)
		if r.Feedback {
			t.s.Feedback = ev.Detail
		}
		target := stage
		if r.Action == Rework {
			target = r.Target
			t.s.Stages[target].Start, t.s.Stages[target].End = now, time.Time{}
		}
		t.send(EffectShutdown, stage, s.Worker, s.Assignment)
		// The worker name counts this stage's failures ("-fix{n}").
		t.assign(target, r.Worker, &v, false, now)
	case Pause:
		t.setResult(stage, r.Result, &v)
		t.pause(ReasonStageError, expand(r.Escalate, &v), r.Suggest, true, 0, now)
	case MergeDone:
		t.setResult(stage, r.Result, &v)
		t.s.Status = StatusMerging
		t.send(EffectShutdown, stage, s.Worker, s.Assignment)
		t.add(EffectMerge, stage).Title = s.Title
	}
	return nil
}

// effects is how many effects a report that r applies to adds to s:
// the ACK, then a stage change (shutdown and spawn, or shutdown and merge)
// or a pause.
func (r *Rule) effects(s *State, problem string) int {
	pause := 1 + s.pauseEffects(true)
	switch {
	case problem != "":
		return pause
	case r.Action == Pause:
		return pause
	case r.Action == Retry || r.Action == Rework:
		failures := s.stage(s.Stage).Failures + 1
		if failures > r.Limit || (r.Action == Rework && failures == r.Limit) {
			return pause
		}
	}
	return 3
}

// pauseEffects is how many effects pause adds to s.
func (s *State) pauseEffects(removeWorktree bool) int {
	n := 2 // escalate, append the report
	if removeWorktree {
		n++ // shut the worker down
		if s.Worktree {
			n++
		}
	}
	return n
}

// pause stops the item with an escalation, in this order: (ACK,)
// remove the worktree, escalate, shut the worker down, report.
func (t *transition) pause(reason PauseReason, msg, suggest string, removeWorktree bool, limit int, now time.Time) {
	s := &t.s
	s.Status = StatusPaused
	if removeWorktree && s.Worktree {
		s.Worktree = false
		t.add(EffectRemoveWorktree, s.Stage)
	}
	esc := &Escalation{Item: s.Item, Stage: s.Stage, Reason: reason, Message: msg, Worker: s.Worker,
		Assignment: s.Assignment, Failures: s.stage(s.Stage).Failures, Limit: limit, Crashes: s.Crash.Crashes,
		SuggestedAction: suggest, At: now}
	s.Pause = esc
	t.add(EffectEscalate, s.Stage).Escalation = esc
	esc.Key = t.effs[len(t.effs)-1].Key()
	if removeWorktree {
		t.send(EffectShutdown, s.Stage, s.Worker, s.Assignment)
	}
	t.add(EffectAppendReport, s.Stage)
}

func (f *Flow) merged(t *transition, s *State, h handler, ev *Event, now time.Time) error {
	effects := 2 // a pause without removing the worktree
	if h == onMerged {
		effects = 1
		if f.DoneStatus != "" {
			effects++
		}
		if s.Worktree {
			effects++
		}
	}
	t.begin(f, s, now, false, effects)
	switch h {
	case onMerged:
		t.s.Status = StatusDone
		t.s.Commit = ev.Commit
		if f.DoneStatus != "" {
			t.add(EffectUpdateBoard, s.Stage).BoardStatus = f.DoneStatus
		}
		t.add(EffectAppendReport, s.Stage)
		if t.s.Worktree {
			t.s.Worktree = false
			t.add(EffectRemoveWorktree, s.Stage)
		}
	case onMergeConflict:
		// The worktree stays: the person resolving the conflict needs it.
		msg := "Merge conflict in Story " + string(s.Item) + ": " + strings.Join(ev.Files, ", ") + ". Manual resolution required."
		t.pause(ReasonMergeConflict, msg, "resolve the conflicts in the item's worktree (rebase it onto the target), then resolve the item at Stage 3", false, 0, now)
		t.s.Pause.Files = slices.Clone(ev.Files) // the effect shares the escalation
	case onMergeFailed:
		t.pause(ReasonMergeFailed, "Story "+string(s.Item)+" could not be merged: "+ev.Detail,
			"fix what the merge refused (commit or discard changes, fix the check), then resolve the item at Stage 3", false, 0, now)
	}
	return nil
}
