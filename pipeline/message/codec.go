package message

import (
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// The line shapes. Ids are captured loosely and then checked with
// foreman.ItemID.Validate, which is stricter than any capture here and
// broader than the message protocol's [A-Z]+-\d+ (Foreman's ids are not all
// Jira keys). The report separators are the protocol's patterns: "\.\s*"
// after a COMPLETE id, ":\s*" after an ERROR id.
var (
	completeRE = regexp.MustCompile(`^Stage (` + stageNum + `) COMPLETE for (\S+)\.\s*(.*)$`)
	errorRE    = regexp.MustCompile(`^Stage (` + stageNum + `) ERROR for ([^\s:]+):\s*(.*)$`)
	reportRE   = regexp.MustCompile(`^Stage (` + stageNum + `) REPORT for ([^\s:]+): (` + outcomeWord + `)\.?` +
		`(?: Score: (\d{1,5})\.?)?(?: Tasks: (\d{1,5})\.?)?(?: Details: (.+))?$`)
	stage0RE   = regexp.MustCompile(`^(\d+) tasks created\. Plan score: (\d)/4\.?$`)
	stage1RE   = regexp.MustCompile(`^Verdict: (GO|NO-GO)\. Readiness: (\d+)(.*)$`)
	stage2RE   = regexp.MustCompile(`^All tasks Done\. Story set to To Review\.?$`)
	stage3RE   = regexp.MustCompile(`^Verdict: (PASS|CONCERNS|WAIVED|FAIL)\. Quality Score: (\d+)/100(.*)$`)
	ackRE      = regexp.MustCompile(`^ACK Stage (` + stageNum + `) for (\S+)$`)
	executeRE  = regexp.MustCompile(`^Execute Stage (` + stageNum + `) for (\S+)$`)
	probeRE    = regexp.MustCompile(`^Status check: are you still working on Stage (` + stageNum + `) for ([^\s?]+)\?$`)
	shutdownRE = regexp.MustCompile(`^Pipeline complete for (\S+)\. Shutting down\.$`)
	callbackRE = regexp.MustCompile(`^\[([A-Za-z][A-Za-z0-9_-]*)\] (\S+) (completed|in_progress|failed)(?::\s*(.*))?$`)
)

const agentsSep = ". Agents: "

// stageNum is a stage number of 0..MaxStage as a line writes it: no
// leading zeros, so that every stage has one spelling.
const stageNum = `0|[1-9]\d{0,2}`

// Parse parses one canonical line into its typed message (the values of this
// package's types, never pointers). Surrounding whitespace is ignored; so is
// a missing final period where the message protocol's own patterns do not
// require it (see the package documentation). A line that is not canonical,
// or that holds an invalid id, an out-of-range number, more than one line,
// invalid UTF-8 or a control character other than tab, is a *ParseError
// matching ErrUnparseable.
func Parse(line string) (Message, error) {
	p := parser{line: line}
	m := p.parse(strings.TrimSpace(line))
	if p.err != nil {
		return nil, p.err
	}
	return m, nil
}

type parser struct {
	line string
	err  error
}

func (p *parser) fail(reason string, cause error) Message {
	if p.err == nil {
		p.err = &ParseError{Line: p.line, Reason: reason, Err: cause}
	}
	return nil
}

func (p *parser) parse(s string) Message {
	if strings.ContainsAny(s, "\r\n") {
		return p.fail("more than one line", nil)
	}
	if !utf8.ValidString(s) {
		return p.fail("invalid UTF-8", nil)
	}
	// Free text ends up in escalations, reports and terminals; a control
	// character there is garbage at best and an escape sequence at worst.
	if strings.ContainsFunc(s, func(r rune) bool { return r != '\t' && unicode.IsControl(r) }) {
		return p.fail("control character", nil)
	}
	switch {
	case strings.HasPrefix(s, "Stage "):
		return p.report(s)
	case strings.HasPrefix(s, "ACK "):
		m := ackRE.FindStringSubmatch(s)
		if m == nil {
			return p.fail(`not "ACK Stage {N} for {id}"`, nil)
		}
		return Ack{Stage: p.stage(m[1]), Item: p.item(m[2])}
	case strings.HasPrefix(s, "Execute "):
		m := executeRE.FindStringSubmatch(s)
		if m == nil {
			return p.fail(`not "Execute Stage {N} for {id}"`, nil)
		}
		return ExecuteStage{Stage: p.stage(m[1]), Item: p.item(m[2])}
	case strings.HasPrefix(s, "Status check"):
		m := probeRE.FindStringSubmatch(s)
		if m == nil {
			return p.fail(`not "Status check: are you still working on Stage {N} for {id}?"`, nil)
		}
		return StatusCheck{Stage: p.stage(m[1]), Item: p.item(m[2])}
	case strings.HasPrefix(s, "Status for "):
		return p.statusReply(s)
	case strings.HasPrefix(s, "Pipeline complete "):
		m := shutdownRE.FindStringSubmatch(s)
		if m == nil {
			return p.fail(`not "Pipeline complete for {id}. Shutting down."`, nil)
		}
		return Shutdown{Item: p.item(m[1])}
	case strings.HasPrefix(s, "["):
		m := callbackRE.FindStringSubmatch(s)
		if m == nil {
			return p.fail(`not "[{role}] {subject} {completed|in_progress|failed}[: {text}]"`, nil)
		}
		return Callback{Role: Role(strings.ToLower(m[1])), Subject: p.item(m[2]), Status: CallbackStatus(m[3]), Text: m[4]}
	default:
		return p.fail("no canonical line starts like this", nil)
	}
}

func (p *parser) report(s string) Message {
	if strings.Contains(s, " REPORT for ") {
		return p.stageReport(s)
	}
	if m := errorRE.FindStringSubmatch(s); m != nil {
		stage, item, details := p.storyStage(m[1]), p.item(m[2]), m[3]
		switch stage {
		case 0:
			return Stage0Error{Item: item, Details: details}
		case 1:
			return Stage1Error{Item: item, Details: details}
		case 2:
			return Stage2Error{Item: item, Details: details}
		case 3:
			return Stage3Error{Item: item, Details: details}
		}
		return nil // p.stage failed
	}
	m := completeRE.FindStringSubmatch(s)
	if m == nil {
		return p.fail(`not "Stage {N} COMPLETE for {id}. …" nor "Stage {N} ERROR for {id}: …"`, nil)
	}
	stage, item, body := p.storyStage(m[1]), p.item(m[2]), m[3]
	if p.err != nil {
		return nil
	}
	switch stage {
	case 0:
		b := stage0RE.FindStringSubmatch(body)
		if b == nil {
			return p.fail(`Stage 0 report is not "{N} tasks created. Plan score: {score}/4."`, nil)
		}
		return Stage0Complete{Item: item, Tasks: p.number("task count", b[1], MaxTasks), PlanScore: p.number("plan score", b[2], MaxPlanScore)}
	case 1:
		b := stage1RE.FindStringSubmatch(body)
		if b == nil {
			return p.fail(`Stage 1 report is not "Verdict: {GO|NO-GO}. Readiness: {score}…"`, nil)
		}
		reason, agents := p.tail(b[3], "Reason")
		return Stage1Complete{Item: item, Verdict: Stage1Verdict(b[1]), Readiness: p.number("readiness", b[2], MaxReadiness), Reason: reason, Agents: agents}
	case 2:
		if !stage2RE.MatchString(body) {
			return p.fail(`Stage 2 report is not "All tasks Done. Story set to To Review."`, nil)
		}
		return Stage2Complete{Item: item}
	default:
		b := stage3RE.FindStringSubmatch(body)
		if b == nil {
			return p.fail(`Stage 3 report is not "Verdict: {PASS|CONCERNS|WAIVED|FAIL}. Quality Score: {score}/100…"`, nil)
		}
		issues, agents := p.tail(b[3], "Issues")
		return Stage3Complete{Item: item, Verdict: Stage3Verdict(b[1]), Score: p.number("quality score", b[2], MaxQualityScore), Issues: issues, Agents: agents}
	}
}

// tail parses what follows the score of a Stage 1 or Stage 3 report:
// nothing, or ". {field}: {text}", or ". Agents: {agents}.", or both in that
// order. The field's text may hold anything, periods included; the last
// ". Agents: " ends it, so an agents list never contains that separator when
// the field is present.
func (p *parser) tail(t, field string) (text, agents string) {
	if t == "" || t == "." {
		return "", ""
	}
	b, ok := strings.CutPrefix(t, ". ")
	if !ok {
		return "", p.failString(fmt.Sprintf(`expected ". %s: …" or ". Agents: …" after the score`, field))
	}
	if a, ok := strings.CutPrefix(b, "Agents: "); ok {
		return "", p.agents(a)
	}
	rest, ok := strings.CutPrefix(b, field+": ")
	if !ok {
		return "", p.failString(fmt.Sprintf(`expected "%s: " or "Agents: " after the score`, field))
	}
	if i := strings.LastIndex(rest, agentsSep); i >= 0 {
		text, agents = rest[:i], p.agents(rest[i+len(agentsSep):])
	} else {
		text = rest
	}
	if text == "" {
		return "", p.failString("empty " + field)
	}
	return text, agents
}

// agents strips the period that ends the Agents field; it is optional, as a
// worker that drops it still means the same list.
func (p *parser) agents(a string) string {
	a = strings.TrimSuffix(a, ".")
	if a == "" {
		return p.failString("empty Agents")
	}
	return a
}

func (p *parser) failString(reason string) string {
	p.fail(reason, nil)
	return ""
}

func (p *parser) statusReply(s string) Message {
	r, err := health.ParseStatusReply(s)
	if err != nil {
		var re *health.ReplyError
		reason := "not a status reply"
		if errors.As(err, &re) {
			reason = re.Reason
		}
		return p.fail(reason, err)
	}
	if r.Stage < 0 || r.Stage > MaxStage {
		return p.fail(fmt.Sprintf("stage %d out of range 0..%d", r.Stage, MaxStage), nil)
	}
	return StatusReply{r}
}

func (p *parser) stage(digits string) int {
	n, _ := strconv.Atoi(digits) // stageNum: at most three digits
	if n > MaxStage {
		p.fail(fmt.Sprintf("stage %d out of range 0..%d", n, MaxStage), nil)
		return 0
	}
	return n
}

// storyStage is the stage of a story-flow report line (COMPLETE, ERROR),
// which only stages 0..MaxStoryStage have.
func (p *parser) storyStage(digits string) int {
	n := p.stage(digits)
	if n > MaxStoryStage {
		p.fail(fmt.Sprintf(`stage %d has no story-flow report line (stages 0..%d): it reports with "Stage {N} REPORT for {id}: {OUTCOME}…"`,
			n, MaxStoryStage), nil)
		return 0
	}
	return n
}

func (p *parser) number(what, digits string, max int) int {
	n, err := strconv.Atoi(digits)
	if err != nil || n > max {
		p.fail(fmt.Sprintf("%s %s out of range 0..%d", what, digits, max), nil)
		return 0
	}
	return n
}

func (p *parser) item(s string) foreman.ItemID {
	id := foreman.ItemID(s)
	if err := id.Validate(); err != nil {
		p.fail("invalid id", err)
		return ""
	}
	return id
}

// Format renders m as its canonical line; Parse(Format(m)) == m for every
// valid m (see Validate). Format does not check m: an invalid message
// renders as-is and will not parse back. Format(nil) is "".
func Format(m Message) string {
	if m == nil || (reflect.ValueOf(m).Kind() == reflect.Pointer && reflect.ValueOf(m).IsNil()) {
		return ""
	}
	return m.format()
}

// Validate reports whether m survives the round trip through its canonical
// line; if not, the error says why.
func Validate(m Message) error {
	if m == nil {
		return errors.New("message: nil message")
	}
	got, err := Parse(Format(m))
	if err != nil {
		return err
	}
	if got != m {
		return fmt.Errorf("message: %#v does not round-trip: its line %q parses as %#v", m, Format(m), got)
	}
	return nil
}

func (m Stage0Complete) format() string {
	return fmt.Sprintf("Stage 0 COMPLETE for %s. %d tasks created. Plan score: %d/4.", m.Item, m.Tasks, m.PlanScore)
}

func (m Stage1Complete) format() string {
	s := fmt.Sprintf("Stage 1 COMPLETE for %s. Verdict: %s. Readiness: %d", m.Item, m.Verdict, m.Readiness)
	return s + formatTail("Reason", m.Reason, m.Agents)
}

func (m Stage2Complete) format() string {
	return fmt.Sprintf("Stage 2 COMPLETE for %s. All tasks Done. Story set to To Review.", m.Item)
}

func (m Stage3Complete) format() string {
	s := fmt.Sprintf("Stage 3 COMPLETE for %s. Verdict: %s. Quality Score: %d/100", m.Item, m.Verdict, m.Score)
	return s + formatTail("Issues", m.Issues, m.Agents)
}

// formatTail writes the message protocol's forms: "." alone; ". {field}:
// {text}" with no final period (phase4_handlers.md); ". Agents: {agents}."
// always with one (message_protocol.md).
func formatTail(field, text, agents string) string {
	switch {
	case text == "" && agents == "":
		return "."
	case agents == "":
		return ". " + field + ": " + text
	case text == "":
		return agentsSep + agents + "."
	default:
		return ". " + field + ": " + text + agentsSep + agents + "."
	}
}

func formatError(stage int, item foreman.ItemID, details string) string {
	return fmt.Sprintf("Stage %d ERROR for %s: %s", stage, item, details)
}

func (m Stage0Error) format() string { return formatError(0, m.Item, m.Details) }
func (m Stage1Error) format() string { return formatError(1, m.Item, m.Details) }
func (m Stage2Error) format() string { return formatError(2, m.Item, m.Details) }
func (m Stage3Error) format() string { return formatError(3, m.Item, m.Details) }

func (m StatusReply) format() string {
	return fmt.Sprintf("Status for %s: Stage %d %s. Current step: %s.", m.Item, m.Stage, m.Status, m.Step)
}

func (m Callback) format() string {
	s := fmt.Sprintf("[%s] %s %s", m.Role, m.Subject, m.Status)
	if m.Text != "" {
		s += ": " + m.Text
	}
	return s
}

func (m Ack) format() string          { return fmt.Sprintf("ACK Stage %d for %s", m.Stage, m.Item) }
func (m ExecuteStage) format() string { return fmt.Sprintf("Execute Stage %d for %s", m.Stage, m.Item) }
func (m StatusCheck) format() string  { return health.ProbeText(m.Item, m.Stage) }
func (m Shutdown) format() string {
	return fmt.Sprintf("Pipeline complete for %s. Shutting down.", m.Item)
}
