package pipeline

import (
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
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
)

// table is the whole item lifecycle: every (status, event) pair not listed
// is a *TransitionError. Stage outcomes are the flow's own tables (Rule).
var table = [numStatuses][numEventKinds]handler{
	StatusNew: {EventStart: onStart},
	StatusActive: {EventReport: onReport, EventStatusReply: onStatusReply, EventIdle: onIdle,
		EventProbeTimeout: onProbeTimeout, EventUnparseable: onUnparseable},
	StatusMerging: {EventReport: onLateReport, EventStatusReply: onIgnore, EventIdle: onIgnore,
		EventProbeTimeout: onIgnore, EventUnparseable: onIgnore,
		EventMerged: onMerged, EventMergeConflict: onMergeConflict, EventMergeFailed: onMergeFailed},
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
// Worker events pass two guards first (seed 000): sender validation (the
// sender must hold the item's current assignment, by worker name and
// assignment id: anything else is stale, counted in State.Stale and ignored)
// and the state guard (a report for a stage the item is not in, from its
// current or last worker, is a duplicate: counted in State.Duplicates and
// re-ACKed, never reprocessed).
func (f *Flow) Step(s State, ev Event, now time.Time) (State, []Effect, error) {
	if s.Status >= numStatuses || ev.Kind == 0 || ev.Kind >= numEventKinds {
		return s, nil, &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind}
	}
	h := table[s.Status][ev.Kind]
	switch h {
	case invalid:
		return s, nil, &TransitionError{Item: s.Item, Status: s.Status, Event: ev.Kind}
	case onStart, onResolve, onMerged, onMergeConflict, onMergeFailed:
	default:
		// Worker events: sender validation, then the state guard.
		from := s.sender(&ev)
		if from == fromStranger || (from == fromLast && ev.Kind != EventReport) {
			if from == fromLast {
				return s, nil, nil // an idle or a late reply from a worker already done: expected
			}
			next := s
			next.Stale++
			next.Updated = now
			return next, nil, nil
		}
		if ev.Kind == EventReport && (from == fromLast || h == onLateReport || ev.Stage != s.Stage) {
			next := s
			next.Duplicates++
			next.Steps++
			next.Updated = now
			return next, []Effect{{Kind: EffectAck, Item: s.Item, Step: next.Steps, Worker: ev.Worker,
				Assignment: ev.Assignment, Stage: ev.Stage}}, nil
		}
		switch h {
		case onStatusReply:
			if ev.Stage != s.Stage {
				return s, nil, nil // an answer about another stage clears nothing
			}
			if s.Unparsed == 0 && s.Crash.Phase != health.Suspicious && s.Crash.Phase != health.Probing {
				return s, nil, nil // an answer nobody waits for
			}
		case onProbeTimeout:
			if s.Crash.Phase != health.Probing {
				return s, nil, nil // a timer that outlived its probe
			}
		case onIgnore:
			return s, nil, nil
		}
	}

	// The handlers build the new state and its effects in t. Passing the
	// states by pointer keeps a transition to two copies of State: s into
	// t.s, t.s out.
	var t transition
	var err error
	switch h {
	case onStart:
		err = f.start(&t, &s, &ev, now)
	case onResolve:
		err = f.resolve(&t, &s, &ev, now)
	case onMerged, onMergeConflict, onMergeFailed:
		err = f.merged(&t, &s, h, &ev, now)
	case onReport:
		err = f.report(&t, &s, &ev, now)
	case onStatusReply:
		err = f.statusReply(&t, &s, now)
	case onIdle:
		err = f.crashStep(&t, &s, health.EventIdle, now)
	case onProbeTimeout:
		err = f.crashStep(&t, &s, health.EventProbeTimeout, now)
	case onUnparseable:
		err = f.unparseable(&t, &s, &ev, now)
	default:
		return s, nil, nil
	}
	if err != nil {
		return s, nil, err
	}
	t.flush()
	return t.s, t.effs, nil
}

// transition is a new state and its effects in the making.
type transition struct {
	f    *Flow
	s    State
	effs []Effect
	// txt holds the transition's generated texts until flush; result is a
	// stage result line among them, for Stages[resultStage].
	txt         texts
	result      text
	resultStage int
}

// begin starts a transition from s that will add about effects effects
// (the exact count where the path knows it, so that the slice is never
// regrown). When the stage records change too (copyStages), the effects
// and the records share one allocation for a flow of up to
// maxBlockStages stages: both are new for every such transition and are
// dropped together with the state. Only the records change: the rest of
// the state is a value, copied once into t.
func (t *transition) begin(f *Flow, s *State, now time.Time, copyStages bool, effects int) {
	t.f = f
	t.s = *s
	t.s.Steps++
	t.s.Updated = now
	if !copyStages {
		if effects > 0 {
			t.effs = make([]Effect, 0, effects)
		}
		return
	}
	n := max(len(s.Stages), len(f.Stages))
	switch {
	case n == 0 || n > maxBlockStages || effects > 5:
		t.effs = make([]Effect, 0, effects)
		t.s.Stages = slices.Clone(s.Stages)
		if len(t.s.Stages) < len(f.Stages) {
			t.s.Stages = append(t.s.Stages, make([]StageRecord, len(f.Stages)-len(t.s.Stages))...)
		}
		return
	case effects <= 2:
		b := new(block2)
		t.effs, t.s.Stages = b.effs[:0:effects], b.stages[:n:n]
	case effects <= 3:
		b := new(block3)
		t.effs, t.s.Stages = b.effs[:0:effects], b.stages[:n:n]
	default:
		b := new(block5)
		t.effs, t.s.Stages = b.effs[:0:effects], b.stages[:n:n]
	}
	copy(t.s.Stages, s.Stages)
}

// maxBlockStages bounds the flows whose stage records share the effects'
// allocation (StoryFlow has 4 stages).
const maxBlockStages = 4

// block2, block3 and block5 hold a transition's effects and its stage
// records in one allocation (2 effects: a start or a resolve; 3: a stage
// change; 5: a pause). Each is sized for its own count: the effects are
// most of a transition's bytes, and the bytes allocated set how often the
// garbage collector runs.
type (
	block2 struct {
		effs   [2]Effect
		stages [maxBlockStages]StageRecord
	}
	block3 struct {
		effs   [3]Effect
		stages [maxBlockStages]StageRecord
	}
	block5 struct {
		effs   [5]Effect
		stages [maxBlockStages]StageRecord
	}
)

// add appends an effect of kind at stage and returns it for its other
// fields. The fields are set one by one in the new slot, which is zero
// (t.effs only grows into fresh memory): copying a whole Effect into the
// heap costs a write barrier on each of its eight pointer words while the
// garbage collector marks, and it marks often at this allocation rate.
func (t *transition) add(kind EffectKind, stage int) *Effect {
	i := len(t.effs)
	if i < cap(t.effs) {
		t.effs = t.effs[:i+1]
	} else {
		t.effs = append(t.effs, Effect{})
	}
	e := &t.effs[i]
	e.Kind, e.Index, e.Step, e.Item, e.Stage = kind, int32(i), t.s.Steps, t.s.Item, stage
	return e
}

// send adds an effect addressed to a worker's assignment (an ACK, a
// shutdown, a probe).
func (t *transition) send(kind EffectKind, stage int, w foreman.WorkerID, a foreman.AssignmentID) {
	e := t.add(kind, stage)
	e.Worker, e.Assignment = w, a
}

// setResult sets the result line of stage from tpl; a line with fields
// waits in t.txt for the flush.
func (t *transition) setResult(stage int, tpl string, v *vars) {
	if t.result.inBuf {
		t.flush() // one line per transition; a second one after all
	}
	x := t.txt.add(tpl, v)
	if !x.inBuf {
		t.s.Stages[stage].Result = x.own
		return
	}
	t.result, t.resultStage = x, stage
}

// flush makes the buffered texts one string, sets the result line waiting
// among them and returns the string.
func (t *transition) flush() string {
	all := t.txt.flush()
	if t.result.inBuf {
		t.s.Stages[t.resultStage].Result = t.result.in(all)
		t.result = text{}
	}
	return all
}

// assign gives the item a fresh worker on a new assignment at stage. The
// worker's name is workerTpl expanded with wv, or the flow's stage worker
// name when workerTpl is empty.
func (t *transition) assign(stage int, workerTpl string, wv *vars, resume bool, now time.Time) {
	s := &t.s
	s.Assignments++
	s.Stage = stage
	s.Status = StatusActive
	if workerTpl == "" {
		workerTpl, wv = t.f.Worker, nil
	}
	if wv == nil {
		wv = &vars{s: s, stage: stage, n: s.Stages[stage].Failures}
	}
	w := t.txt.add(workerTpl, wv)
	a := t.txt.addID(s.Item, s.Assignments)
	all := t.flush()
	s.Worker = foreman.WorkerID(safeID(w.in(all)))
	s.Assignment = foreman.AssignmentID(safeID(a.in(all)))
	s.Crash = health.State{Phase: health.Working, Crashes: s.Crash.Crashes, Since: now}
	s.Unparsed = 0
	e := t.add(EffectSpawn, stage)
	e.Worker, e.Assignment, e.Resume, e.Readiness, e.Feedback = s.Worker, s.Assignment, resume, s.Readiness, s.Feedback
}

// safeID keeps a generated name within the 64 characters ids allow, keeping
// it unique with a hash of what was cut.
func safeID(id string) string {
	if len(id) <= 64 {
		return id
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return strings.TrimRight(id[:55], "-.") + "-" + fmt.Sprintf("%08x", h.Sum32())
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

// pause stops the item with an escalation, in the seed's order: (ACK,)
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
