package message

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/agentforeman/foreman"
)

// Report is a stage report of any flow at any stage: the typed verdict a
// stage runner hands its coordinator in one process, and a line of its own
// on the wire for the stages and outcomes the story flow's lines cannot
// say:
//
//	Stage {N} REPORT for {id}: {OUTCOME}. Score: {score}. Tasks: {n}. Details: {text}
//
// where Score, Tasks and Details are each optional (in that order) and
// OUTCOME is an outcome word (ValidOutcome): COMPLETE, ERROR, GO, NO-GO,
// PASS, CONCERNS, WAIVED, FAIL, or a flow's own. Canonical gives the story
// flow's own message (Stage0Complete … Stage3Error) when one says exactly
// the same, and ReportOf turns any stage report back into a Report, so
// that a coordinator reads every stage report one way.
type Report struct {
	Item  foreman.ItemID
	Stage int // 0..MaxStage
	// Outcome is the verdict or result, an outcome word (ValidOutcome).
	Outcome string
	// Score is the report's score when HasScore is set: 0..MaxReportScore
	// here, the flow's rule bounds it further.
	Score    int
	HasScore bool
	// Tasks is a plan's task count, 1..MaxTasks; 0: none.
	Tasks int
	// Detail is an error's details, a verdict's reason or issues, or what
	// was done; empty: none. Canonical keeps it on one line as Detail
	// makes it.
	Detail string
}

// The outcome words of the story flow's reports.
const (
	OutcomeComplete = "COMPLETE"
	OutcomeError    = "ERROR"
)

// MaxReportScore bounds a Report's score: a larger number is a garbled
// message, not a score.
const MaxReportScore = 9999

// maxOutcomeLen bounds an outcome word.
const maxOutcomeLen = 32

// outcomeWord is an outcome as a report line writes it.
const outcomeWord = `[A-Z][A-Z0-9_-]{0,31}`

var outcomeRE = regexp.MustCompile(`^(?:` + outcomeWord + `)$`)

// ValidOutcome reports whether o can be a Report's outcome: an upper-case
// word of letters, digits, '_' and '-', starting with a letter, of at most
// 32 bytes ("COMPLETE", "NO-GO", "NEEDS_WORK").
func ValidOutcome(o string) bool { return len(o) <= maxOutcomeLen && outcomeRE.MatchString(o) }

func (Report) Kind() Kind               { return KindReport }
func (r Report) ItemID() foreman.ItemID { return r.Item }
func (r Report) StageNum() int          { return r.Stage }
func (r Report) format() string {
	var b strings.Builder
	fmt.Fprintf(&b, "Stage %d REPORT for %s: %s.", r.Stage, r.Item, r.Outcome)
	if r.HasScore {
		fmt.Fprintf(&b, " Score: %d.", r.Score)
	}
	if r.Tasks != 0 {
		fmt.Fprintf(&b, " Tasks: %d.", r.Tasks)
	}
	if r.Detail != "" {
		b.WriteString(" Details: " + r.Detail)
	}
	return b.String()
}

// stageReport parses the Report line.
func (p *parser) stageReport(s string) Message {
	m := reportRE.FindStringSubmatch(s)
	if m == nil {
		return p.fail(`not "Stage {N} REPORT for {id}: {OUTCOME}.[ Score: {n}.][ Tasks: {n}.][ Details: {text}]"`, nil)
	}
	r := Report{Stage: p.stage(m[1]), Item: p.item(m[2]), Outcome: m[3], Detail: m[6]}
	if m[4] != "" {
		r.Score, r.HasScore = p.number("score", m[4], MaxReportScore), true
	}
	if m[5] != "" {
		if r.Tasks = p.number("task count", m[5], MaxTasks); r.Tasks == 0 && p.err == nil {
			return p.fail("task count 0: a report without tasks leaves Tasks out", nil)
		}
	}
	if p.err != nil {
		return nil
	}
	return r
}

// ReportOf returns the Report a stage report says: the report itself, or
// what a story-flow line (Stage0Complete … Stage3Error) says in a Report's
// terms (Agents, which no coordinator decides on, is left out). ok is false
// for a message that is no stage report.
func ReportOf(m Message) (r Report, ok bool) {
	switch m := m.(type) {
	case Report:
		return m, true
	case Stage0Complete:
		return Report{Item: m.Item, Stage: 0, Outcome: OutcomeComplete, Score: m.PlanScore, HasScore: true, Tasks: m.Tasks}, true
	case Stage1Complete:
		return Report{Item: m.Item, Stage: 1, Outcome: string(m.Verdict), Score: m.Readiness, HasScore: true, Detail: m.Reason}, true
	case Stage2Complete:
		return Report{Item: m.Item, Stage: 2, Outcome: OutcomeComplete}, true
	case Stage3Complete:
		return Report{Item: m.Item, Stage: 3, Outcome: string(m.Verdict), Score: m.Score, HasScore: true, Detail: m.Issues}, true
	case Stage0Error:
		return errorReport(m.Item, 0, m.Details), true
	case Stage1Error:
		return errorReport(m.Item, 1, m.Details), true
	case Stage2Error:
		return errorReport(m.Item, 2, m.Details), true
	case Stage3Error:
		return errorReport(m.Item, 3, m.Details), true
	}
	return Report{}, false
}

func errorReport(item foreman.ItemID, stage int, details string) Report {
	return Report{Item: item, Stage: stage, Outcome: OutcomeError, Detail: details}
}

// ErrorReport is the ERROR report of item's stage, with details made to
// fit a line (Detail, at most max bytes; max <= 0: no limit).
func ErrorReport(item foreman.ItemID, stage int, details string, max int) Report {
	return errorReport(item, stage, Detail(details, max))
}

// Canonical returns the message whose line says r: the story flow's own
// (Stage0Complete … Stage3Error) when one says exactly r, so that agents
// and people keep reading the lines they know, else r. ReportOf gives r
// back from either.
func (r Report) Canonical() Message {
	if r.Stage < 0 || r.Stage > MaxStoryStage {
		return r
	}
	var c Message
	switch {
	case r.Outcome == OutcomeError:
		switch r.Stage {
		case 0:
			c = Stage0Error{Item: r.Item, Details: r.Detail}
		case 1:
			c = Stage1Error{Item: r.Item, Details: r.Detail}
		case 2:
			c = Stage2Error{Item: r.Item, Details: r.Detail}
		default:
			c = Stage3Error{Item: r.Item, Details: r.Detail}
		}
	case r.Stage == 0 && r.Outcome == OutcomeComplete:
		c = Stage0Complete{Item: r.Item, Tasks: r.Tasks, PlanScore: r.Score}
	case r.Stage == 1:
		c = Stage1Complete{Item: r.Item, Verdict: Stage1Verdict(r.Outcome), Readiness: r.Score, Reason: r.Detail}
	case r.Stage == 2 && r.Outcome == OutcomeComplete:
		c = Stage2Complete{Item: r.Item}
	case r.Stage == 3:
		c = Stage3Complete{Item: r.Item, Verdict: Stage3Verdict(r.Outcome), Score: r.Score, Issues: r.Detail}
	default:
		return r
	}
	if back, _ := ReportOf(c); back != r || Validate(c) != nil {
		return r
	}
	return c
}

// Line is the line that says m: Format of a Report's Canonical message,
// else Format(m). It is what a coordinator shows of a typed report, and
// what a stage runner prints for a coordinator in another process.
func Line(m Message) string {
	if r, ok := m.(Report); ok {
		return Format(r.Canonical())
	}
	return Format(m)
}
