package pipeline

import (
	"fmt"
	"hash/fnv"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// How a handler of Flow.AppendStep builds its transition: the new state,
// its effects appended to the caller's slice or allocated with the stage
// records, and its generated texts.

// transition is a new state and its effects in the making.
type transition struct {
	f *Flow
	s State
	// effs is the caller's effects then this transition's, from base on.
	// A caller's buffer (appending) may hold old effects in its spare
	// capacity.
	effs      []Effect
	base      int
	appending bool
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
//
// Effects appended to a caller's slice (AppendStep) grow it if they must,
// and the stage records are a copy of their own: the caller's buffer
// outlives the state or is reused before it.
func (t *transition) begin(f *Flow, s *State, now time.Time, copyStages bool, effects int) {
	t.f = f
	t.s = *s
	t.s.Steps++
	t.s.Updated = now
	if t.effs != nil {
		t.appending = true
		t.effs = slices.Grow(t.effs, effects)
		if copyStages {
			t.s.Stages = f.ownStages(s)
		}
		return
	}
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
		t.s.Stages = f.ownStages(s)
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

// ownStages is a copy of s's stage records, one for each of f's stages at
// least.
func (f *Flow) ownStages(s *State) []StageRecord {
	n := max(len(s.Stages), len(f.Stages))
	if n == 0 {
		return slices.Clone(s.Stages)
	}
	stages := make([]StageRecord, n)
	copy(stages, s.Stages)
	return stages
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
// when Step allocated it (fresh memory) and cleared first in a caller's
// buffer: copying a whole Effect into the heap costs a write barrier on
// each of its eight pointer words while the garbage collector marks, and
// it marks often at this allocation rate.
func (t *transition) add(kind EffectKind, stage int) *Effect {
	i := len(t.effs)
	if i < cap(t.effs) {
		t.effs = t.effs[:i+1]
		if t.appending {
			t.effs[i] = Effect{}
		}
	} else {
		t.effs = append(t.effs, Effect{})
	}
	e := &t.effs[i]
	e.Kind, e.Index, e.Step, e.Item, e.Stage = kind, int32(i-t.base), t.s.Steps, t.s.Item, stage
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
