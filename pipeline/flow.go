package pipeline

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/pipeline/message"
)

// Action is what a stage outcome does to an item.
type Action uint8

const (
	// Advance moves to the next stage with a fresh worker.
	Advance Action = iota + 1
	// Retry runs the stage again with a fresh worker while the stage's
	// failures are at most Limit (Limit retries), then pauses.
	Retry
	// Rework goes back to Target with a fresh worker while the stage's
	// failures are fewer than Limit (Limit cycles in all), then pauses.
	Rework
	// Pause stops the item and escalates.
	Pause
	// MergeDone squash-merges the item, then marks it DONE.
	MergeDone
)

func (a Action) String() string {
	switch a {
	case Advance:
		return "advance"
	case Retry:
		return "retry"
	case Rework:
		return "rework"
	case Pause:
		return "pause"
	case MergeDone:
		return "merge"
	}
	return fmt.Sprintf("Action(%d)", uint8(a))
}

// BoardCheck is what the board must show before a report is believed (the
// board is re-read and checked when a report arrives). A failed check pauses
// the item with an escalation.
type BoardCheck struct {
	// TasksExist requires at least one task under the item.
	TasksExist bool
	// Status requires the item's board status.
	Status string
}

// IsZero reports whether the check checks nothing.
func (c BoardCheck) IsZero() bool { return !c.TasksExist && c.Status == "" }

// problem says what is wrong with b, or "".
func (c BoardCheck) problem(b *BoardStory) string {
	switch {
	case c.IsZero():
		return ""
	case b == nil || !b.Found:
		return "item not on the board"
	case c.TasksExist && b.Tasks == 0:
		return "no tasks under the item"
	case c.Status != "" && b.Status != c.Status:
		return "status is " + strconv.Quote(b.Status) + ", want " + strconv.Quote(c.Status)
	}
	return ""
}

// Rule is one row of a stage's transition table: what an outcome does.
// Text fields are templates: {id}, {stage}, {n} (the failure counter after
// this outcome), {times} ("once", "twice", "3 times"), {tasks}, {score},
// {detail}, {verdict}, {problem}, {next}.
type Rule struct {
	Outcome Outcome
	Action  Action
	// Check must hold on the re-read board before the rule applies.
	Check BoardCheck
	// Target is Rework's stage.
	Target int
	// Limit bounds Retry and Rework (see Action).
	Limit int
	// Worker names a Retry's or Rework's fresh worker; default: the flow's
	// stage worker name.
	Worker string
	// Result is the stage's result line; Exhausted replaces it when a Retry
	// or Rework pauses for its limit.
	Result    string
	Exhausted string
	// Escalate is the escalation line when the rule pauses; Suggest says
	// what a person should do.
	Escalate string
	Suggest  string
	// KeepScore keeps the report's score as the item's readiness, for later
	// stages' prompts.
	KeepScore bool
	// Feedback passes the report's detail to the next worker.
	Feedback bool
	// MaxScore, when positive, bounds the report's score: it must be a
	// whole number in 0..MaxScore, else Step returns a *ReportError and
	// changes nothing. StoryFlow uses pipeline/message's ranges (plan score
	// 0..4, readiness 0..10, quality score 0..100), which Parse enforces
	// on the text; this holds events built by hand to the same ranges.
	MaxScore int
}

// ErrInvalidReport is matched by *ReportError.
var ErrInvalidReport = errors.New("pipeline: invalid report")

// ReportError is a report whose score is outside its rule's range
// (Rule.MaxScore). The state is unchanged.
type ReportError struct {
	Item    foreman.ItemID
	Stage   int
	Outcome Outcome
	Score   string
	Max     int
}

func (e *ReportError) Error() string {
	return fmt.Sprintf("pipeline: item %s: Stage %d %s score %q is not a number in 0..%d", e.Item, e.Stage, e.Outcome, e.Score, e.Max)
}

// Is matches ErrInvalidReport.
func (e *ReportError) Is(target error) bool { return target == ErrInvalidReport }

// scoreOK reports whether score satisfies r.MaxScore.
func (r *Rule) scoreOK(score string) bool {
	if r.MaxScore <= 0 {
		return true
	}
	n, err := strconv.Atoi(score)
	return err == nil && n >= 0 && n <= r.MaxScore && score == strconv.Itoa(n)
}

// StageSpec is one stage of a flow and its table of outcomes.
type StageSpec struct {
	Name  string
	Rules []Rule
}

// Flow is a declarative description of the stages an item goes through:
// each stage's outcomes and the transition each one makes. Step is the only
// interpreter; a Flow is read-only once built and safe to share.
type Flow struct {
	Name   string
	Stages []StageSpec
	// Worker names a stage's fresh worker. Default: DefaultWorker
	// ("story-{id}-s{stage}"). CrashWorker names the worker that replaces a
	// crashed one. Default: DefaultCrashWorker ("story-{id}-s{stage}-retry").
	// NewRuntime fills both defaults (WithDefaults) for every flow. A worker
	// name template (these two and Rule.Worker) may use only {id}, {stage},
	// {n} and {next}, and must make a valid foreman.WorkerID.
	Worker      string
	CrashWorker string
	// CrashBudget is how many confirmed crashes are resumed (health.Step);
	// the next one pauses. CrashEscalate and CrashResult are its texts.
	CrashBudget   int
	CrashEscalate string
	CrashResult   string
	// UnparseableEscalate is the escalation when a worker's messages do not
	// parse even after a probe.
	UnparseableEscalate string
	// DoneStatus is the board status set when the item is DONE.
	DoneStatus string
}

// The default worker name templates of Flow.Worker and Flow.CrashWorker.
const (
	DefaultWorker      = "story-{id}-s{stage}"
	DefaultCrashWorker = "story-{id}-s{stage}-retry"
)

// WithDefaults returns f with its defaults filled: a copy when f leaves
// Worker or CrashWorker empty, else f itself. f is not changed.
func (f *Flow) WithDefaults() *Flow {
	if f == nil || f.Worker != "" && f.CrashWorker != "" {
		return f
	}
	c := *f
	if c.Worker == "" {
		c.Worker = DefaultWorker
	}
	if c.CrashWorker == "" {
		c.CrashWorker = DefaultCrashWorker
	}
	return &c
}

// rule finds the row for (stage, outcome).
func (f *Flow) rule(stage int, o Outcome) (*Rule, bool) {
	if stage < 0 || stage >= len(f.Stages) {
		return nil, false
	}
	rules := f.Stages[stage].Rules
	for i := range rules {
		if rules[i].Outcome == o {
			return &rules[i], true
		}
	}
	return nil, false
}

// NeedsBoard reports whether Step needs the re-read board (Event.Board) for
// this report: the runtime reads the board only then.
func (f *Flow) NeedsBoard(stage int, o Outcome) bool {
	r, ok := f.rule(stage, o)
	return ok && !r.Check.IsZero()
}

// StoryConfig sets StoryFlow's limits. Zero values mean the story flow's
// defaults; a negative value means 0.
type StoryConfig struct {
	// ValidationRetries is how many NO-GO verdicts are retried with a
	// fresh validator before the item pauses. Default: 1.
	ValidationRetries int
	// QualityCycles is how many FAIL verdicts pause the item; fewer are
	// reworked at Stage 2. Default: 2 (one rework).
	QualityCycles int
	// CrashBudget is how many confirmed crashes are resumed. Default: 1
	// (health.DefaultCrashBudget).
	CrashBudget int
}

func orDefault(v, def int) int {
	switch {
	case v == 0:
		return def
	case v < 0:
		return 0
	}
	return v
}

// The board statuses StoryFlow checks and sets (the kanban board's columns).
const (
	BoardTodo     = "Todo"
	BoardToReview = "To Review"
	BoardDone     = "Done"
)

// StoryFlow is the story flow: Stage 0 plan, 1 validate, 2 execute, 3 quality
// gate, then squash merge and DONE, with PAUSED reachable from every stage.
// Two rows go beyond the message protocol, whose ERROR pattern admits them
// without a handler of their own: Stage 1 ERROR and Stage 3 ERROR pause like
// the others.
func StoryFlow(cfg StoryConfig) *Flow {
	const suggestErr = "read the worker's error, fix its cause, then resolve the item at this stage"
	return &Flow{
		Name:   "story",
		Worker: DefaultWorker, CrashWorker: DefaultCrashWorker,
		CrashBudget:         orDefault(cfg.CrashBudget, health.DefaultCrashBudget),
		CrashEscalate:       "Story {id} worker crashed {times} at Stage {stage}",
		CrashResult:         "Crashed at Stage {stage} (crash_count={n})",
		UnparseableEscalate: "Story {id}: unparseable messages from the Stage {stage} worker: {detail}",
		DoneStatus:          BoardDone,
		Stages: []StageSpec{
			{Name: "plan", Rules: []Rule{
				{Outcome: Complete, Action: Advance, Check: BoardCheck{TasksExist: true},
					Result: "{tasks} tasks, {score}/4", MaxScore: message.MaxPlanScore},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}",
					Escalate: "Cannot create tasks for Story {id}: {detail}", Suggest: suggestErr},
			}},
			{Name: "validate", Rules: []Rule{
				{Outcome: Go, Action: Advance, Check: BoardCheck{Status: BoardTodo},
					Result: "GO, {score}", KeepScore: true, MaxScore: message.MaxReadiness},
				{Outcome: NoGo, Action: Retry, Limit: orDefault(cfg.ValidationRetries, 1),
					Worker: "story-{id}-s1-retry", Feedback: true, MaxScore: message.MaxReadiness,
					Result: "NO-GO, {score}, {detail}", Exhausted: "NO-GO, {score}, {detail} (retries exhausted)",
					Escalate: "Story {id} failed validation {times}: {detail}",
					Suggest:  "rewrite the story or its tasks to answer the validator's reason, then resolve the item at Stage 1"},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}",
					Escalate: "Story {id} validation failed: {detail}", Suggest: suggestErr},
			}},
			{Name: "execute", Rules: []Rule{
				{Outcome: Complete, Action: Advance, Check: BoardCheck{Status: BoardToReview}, Result: "Done"},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}",
					Escalate: "Story {id} execution failed: {detail}", Suggest: suggestErr},
			}},
			{Name: "quality", Rules: []Rule{
				{Outcome: Pass, Action: MergeDone, Result: "{verdict} {score}/100", MaxScore: message.MaxQualityScore},
				{Outcome: Concerns, Action: MergeDone, Result: "{verdict} {score}/100", MaxScore: message.MaxQualityScore},
				{Outcome: Waived, Action: MergeDone, Result: "{verdict} {score}/100", MaxScore: message.MaxQualityScore},
				{Outcome: Fail, Action: Rework, Target: 2, Limit: orDefault(cfg.QualityCycles, 2),
					Worker: "story-{id}-s2-fix{n}", Feedback: true, MaxScore: message.MaxQualityScore,
					Result: "FAIL {score}/100", Exhausted: "FAIL {score}/100 (cycles exhausted)",
					Escalate: "Story {id} failed quality gate {n} times",
					Suggest:  "review the quality gate's issues and the branch, fix or waive them, then resolve the item at Stage 2 or 3"},
				{Outcome: Error, Action: Pause, Result: "ERROR: {detail}",
					Escalate: "Story {id} quality gate failed: {detail}", Suggest: suggestErr},
			}},
		},
	}
}

// vars are the values a template may use.
type vars struct {
	s       *State
	ev      *Event
	stage   int
	n       int
	problem string
	next    int
}

// appendTimes appends "once", "twice" or "{n} times".
func appendTimes(b []byte, n int) []byte {
	switch n {
	case 1:
		return append(b, "once"...)
	case 2:
		return append(b, "twice"...)
	}
	return append(strconv.AppendInt(b, int64(n), 10), " times"...)
}

// hasFields reports whether tpl needs expanding.
func hasFields(tpl string) bool { return strings.IndexByte(tpl, '{') >= 0 }

// expand fills a template into a string of its own. It allocates only for
// templates with fields, and then once, the exact size.
func expand(tpl string, v *vars) string {
	if !hasFields(tpl) {
		return tpl
	}
	var buf [256]byte
	return string(appendExpand(buf[:0], tpl, v))
}

// appendExpand appends the expansion of tpl to b. An unknown field stays as
// it is, braces included.
func appendExpand(b []byte, tpl string, v *vars) []byte {
	for {
		i := strings.IndexByte(tpl, '{')
		if i < 0 {
			break
		}
		b = append(b, tpl[:i]...)
		tpl = tpl[i:]
		j := strings.IndexByte(tpl, '}')
		if j < 0 {
			break
		}
		b = v.appendField(b, tpl[:j+1])
		tpl = tpl[j+1:]
	}
	return append(b, tpl...)
}

// appendField appends the value of field ("{name}"), or field itself when
// there is no such field.
func (v *vars) appendField(b []byte, field string) []byte {
	switch field {
	case "{id}":
		return append(b, v.s.Item...)
	case "{stage}":
		return strconv.AppendInt(b, int64(v.stage), 10)
	case "{next}":
		return strconv.AppendInt(b, int64(v.next), 10)
	case "{n}":
		return strconv.AppendInt(b, int64(v.n), 10)
	case "{times}":
		return appendTimes(b, v.n)
	case "{problem}":
		return append(b, v.problem...)
	}
	if v.ev != nil {
		switch field {
		case "{tasks}":
			return strconv.AppendInt(b, int64(v.ev.Tasks), 10)
		case "{score}":
			return append(b, v.ev.Score...)
		case "{detail}":
			return append(b, v.ev.Detail...)
		case "{verdict}":
			return append(b, v.ev.Outcome...)
		}
	}
	return append(b, field...)
}

// texts builds the generated strings of one transition (its stage result
// line, the new worker's name, the new assignment id) side by side in a
// buffer on the stack, then makes them one string (flush): one small
// pointer-free allocation of the exact size for all of them, rather than
// one per string or a heap buffer of a guessed size. A text that does not
// fit has a string of its own.
type texts struct {
	n   int
	buf [textsCap]byte
}

// textsCap holds the texts of a usual transition: a result line, a worker
// name and an assignment id for an item id of up to about 60 characters.
const textsCap = 192

// text is a generated string: in the texts buffer until it is flushed, or
// a string of its own.
type text struct {
	own      string
	inBuf    bool
	off, end int
}

// in returns the text, given what its texts buffer was flushed into.
func (x text) in(flushed string) string {
	if x.inBuf {
		return flushed[x.off:x.end]
	}
	return x.own
}

// add expands tpl into the buffer.
func (x *texts) add(tpl string, v *vars) text {
	if !hasFields(tpl) {
		return text{own: tpl}
	}
	return x.fits(appendExpand(x.buf[x.n:x.n], tpl, v))
}

// addID writes item's assignment id number n into the buffer.
func (x *texts) addID(item foreman.ItemID, n int) text {
	b := append(x.buf[x.n:x.n], item...)
	return x.fits(strconv.AppendInt(append(b, "-a"...), int64(n), 10))
}

// fits takes b, just appended at the end of the buffer, into the buffer
// if append wrote it there, else makes it a string of its own.
func (x *texts) fits(b []byte) text {
	if x.n+len(b) > len(x.buf) {
		return text{own: string(b)}
	}
	t := text{inBuf: true, off: x.n, end: x.n + len(b)}
	x.n = t.end
	return t
}

// flush makes the buffered texts one string and empties the buffer.
func (x *texts) flush() string {
	if x.n == 0 {
		return ""
	}
	s := string(x.buf[:x.n])
	x.n = 0
	return s
}
