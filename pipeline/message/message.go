package message

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

// Kind names the kind of a message; each kind has one canonical line.
type Kind int

// The kinds of message. The zero Kind is invalid.
const (
	KindStage0Complete Kind = iota + 1
	KindStage0Error
	KindStage1Complete
	KindStage1Error
	KindStage2Complete
	KindStage2Error
	KindStage3Complete
	KindStage3Error
	KindStatusReply
	KindCallback
	KindAck
	KindExecuteStage
	KindStatusCheck
	KindShutdown
	// KindReport is a Report: a stage report of any flow at any stage.
	KindReport
)

var kindNames = [...]string{
	KindStage0Complete: "Stage0Complete",
	KindStage0Error:    "Stage0Error",
	KindStage1Complete: "Stage1Complete",
	KindStage1Error:    "Stage1Error",
	KindStage2Complete: "Stage2Complete",
	KindStage2Error:    "Stage2Error",
	KindStage3Complete: "Stage3Complete",
	KindStage3Error:    "Stage3Error",
	KindStatusReply:    "StatusReply",
	KindCallback:       "Callback",
	KindAck:            "Ack",
	KindExecuteStage:   "ExecuteStage",
	KindStatusCheck:    "StatusCheck",
	KindShutdown:       "Shutdown",
	KindReport:         "Report",
}

func (k Kind) String() string {
	if k > 0 && int(k) < len(kindNames) {
		return kindNames[k]
	}
	return fmt.Sprintf("Kind(%d)", int(k))
}

// FromWorker reports whether messages of this kind travel from a worker to
// the coordinator (the others are the coordinator's commands).
func (k Kind) FromWorker() bool {
	return (k >= KindStage0Complete && k <= KindCallback) || k == KindReport
}

// IsReport reports whether the kind is a stage report (a COMPLETE or an
// ERROR line): the messages the coordinator acknowledges with an Ack, and
// re-acknowledges when they arrive twice.
func (k Kind) IsReport() bool {
	return (k >= KindStage0Complete && k <= KindStage3Error) || k == KindReport
}

// NoStage is what StageNum returns for a message that is not about a stage
// (a Callback).
const NoStage = -1

// MaxStage is the largest stage number a line may name: a flow has at most
// MaxStage+1 stages. Stage numbers outside 0..MaxStage do not parse.
const MaxStage = 999

// MaxStoryStage is the last stage of the story flow (0 plan, 1 validate,
// 2 implement, 3 quality gate), the last one with report lines of its own
// (Stage0Complete … Stage3Error). Every stage, these included, may also
// report with a Report.
const MaxStoryStage = 3

// Message is one typed message. The set of implementations is closed: the
// types of this package, which are all comparable, so two messages can be
// compared with ==.
type Message interface {
	// Kind is the kind of the message.
	Kind() Kind
	// ItemID is the item (story) the message is about; for a Callback, its
	// task subject.
	ItemID() foreman.ItemID
	// StageNum is the stage the message is about, or NoStage.
	StageNum() int
	// format renders the canonical line; unexported, so the set is closed.
	format() string
}

// Stage1Verdict is the verdict of story validation.
type Stage1Verdict string

// The Stage 1 verdicts.
const (
	VerdictGo   Stage1Verdict = "GO"
	VerdictNoGo Stage1Verdict = "NO-GO"
)

// Stage3Verdict is the verdict of the quality gate.
type Stage3Verdict string

// The Stage 3 verdicts. FAIL sends the story back to Stage 2; the others let
// it merge.
const (
	VerdictPass     Stage3Verdict = "PASS"
	VerdictConcerns Stage3Verdict = "CONCERNS"
	VerdictWaived   Stage3Verdict = "WAIVED"
	VerdictFail     Stage3Verdict = "FAIL"
)

// Score ranges checked by Parse.
const (
	MaxPlanScore    = 4
	MaxReadiness    = 10
	MaxQualityScore = 100
	// MaxTasks bounds the task count of a Stage 0 report; a larger number
	// is a garbled message, not a plan.
	MaxTasks = 9999
)

// AgentsNA is what the pipeline orchestrator stores when a Stage 1 or Stage 3
// report carries no "Agents:" field (workers from older prompts). Parse
// leaves Agents empty instead, so that Format reproduces the line; see
// AgentsOrNA.
const AgentsNA = "N/A"

// Stage0Complete: "Stage 0 COMPLETE for {id}. {N} tasks created. Plan score: {score}/4."
type Stage0Complete struct {
	Item      foreman.ItemID
	Tasks     int // 0..MaxTasks
	PlanScore int // 0..MaxPlanScore
}

// Stage0Error: "Stage 0 ERROR for {id}: {details}"
type Stage0Error struct {
	Item    foreman.ItemID
	Details string
}

// Stage1Complete is both Stage 1 reports:
//
//	Stage 1 COMPLETE for {id}. Verdict: GO. Readiness: {score}.
//	Stage 1 COMPLETE for {id}. Verdict: NO-GO. Readiness: {score}. Reason: {reason}
//
// each optionally ending ". Agents: {agents_info}." (message_protocol.md).
// Reason is optional for either verdict; empty means absent.
type Stage1Complete struct {
	Item      foreman.ItemID
	Verdict   Stage1Verdict
	Readiness int // 0..MaxReadiness
	Reason    string
	Agents    string // empty: the field was absent
}

// AgentsOrNA returns Agents, or AgentsNA when the report had none.
func (m Stage1Complete) AgentsOrNA() string { return agentsOrNA(m.Agents) }

// Stage1Error: "Stage 1 ERROR for {id}: {details}". Without a handler of its
// own in the message protocol (validation failures are NO-GO verdicts), but
// its ERROR pattern admits it, and the health contract treats any "Stage N
// ERROR" as a failed stage.
type Stage1Error struct {
	Item    foreman.ItemID
	Details string
}

// Stage2Complete: "Stage 2 COMPLETE for {id}. All tasks Done. Story set to To Review."
type Stage2Complete struct {
	Item foreman.ItemID
}

// Stage2Error: "Stage 2 ERROR for {id}: {details}"
type Stage2Error struct {
	Item    foreman.ItemID
	Details string
}

// Stage3Complete is every quality-gate report:
//
//	Stage 3 COMPLETE for {id}. Verdict: {PASS|CONCERNS|WAIVED}. Quality Score: {score}/100.
//	Stage 3 COMPLETE for {id}. Verdict: FAIL. Quality Score: {score}/100. Issues: {issues}
//
// each optionally ending ". Agents: {agents_info}.". Issues is optional for
// any verdict; empty means absent.
type Stage3Complete struct {
	Item    foreman.ItemID
	Verdict Stage3Verdict
	Score   int // 0..MaxQualityScore
	Issues  string
	Agents  string // empty: the field was absent
}

// AgentsOrNA returns Agents, or AgentsNA when the report had none.
func (m Stage3Complete) AgentsOrNA() string { return agentsOrNA(m.Agents) }

// Stage3Error: "Stage 3 ERROR for {id}: {details}". Like Stage1Error, admitted
// by the protocol's ERROR pattern without a handler of its own.
type Stage3Error struct {
	Item    foreman.ItemID
	Details string
}

// StatusReply is a worker's answer to a StatusCheck, as health parses it:
//
//	Status for {id}: Stage {N} {EXECUTING|WAITING|ERROR}. Current step: {description}.
type StatusReply struct {
	health.StatusReply
}

// Ack: "ACK Stage {N} for {id}", sent by the coordinator after it processed
// a report, and again when the same report arrives twice.
type Ack struct {
	Stage int
	Item  foreman.ItemID
}

// ExecuteStage: "Execute Stage {N} for {id}", a worker's one assignment.
type ExecuteStage struct {
	Stage int
	Item  foreman.ItemID
}

// StatusCheck is the probe sent to a quiet worker (health.ProbeText):
//
//	Status check: are you still working on Stage {N} for {id}?
type StatusCheck struct {
	Stage int
	Item  foreman.ItemID
}

// Shutdown: "Pipeline complete for {id}. Shutting down.", the content of the
// shutdown request (worker_health_contract.md, Graceful Shutdown Protocol).
type Shutdown struct {
	Item foreman.ItemID
}

// AckFor returns the Ack that acknowledges m, if m is a stage report.
func AckFor(m Message) (Ack, bool) {
	if m == nil || !m.Kind().IsReport() {
		return Ack{}, false
	}
	return Ack{Stage: m.StageNum(), Item: m.ItemID()}, true
}

// Envelope is a message as the coordinator received it: who sent it, under
// which assignment, and the raw text. The coordinator fences on Sender and
// Assignment before it looks at Body.
type Envelope struct {
	Sender     foreman.WorkerID
	Assignment foreman.AssignmentID
	Body       Message // nil when Raw did not parse
	Raw        string
	ReceivedAt time.Time
}

// Open builds the Envelope of a raw message and parses it. The Envelope is
// returned even when the error is not nil, with Body nil, so that the caller
// can log Raw and probe the sender. An invalid sender or assignment id is an
// error matching foreman.ErrInvalidID; an unparseable body is a *ParseError.
func Open(sender foreman.WorkerID, assignment foreman.AssignmentID, raw string, at time.Time) (Envelope, error) {
	env := Envelope{Sender: sender, Assignment: assignment, Raw: raw, ReceivedAt: at}
	if err := sender.Validate(); err != nil {
		return env, err
	}
	if err := assignment.Validate(); err != nil {
		return env, err
	}
	body, err := Parse(raw)
	if err != nil {
		return env, err
	}
	env.Body = body
	return env, nil
}

// Wrap builds the Envelope of a typed message received in the
// coordinator's own process (a stage runner's Report): nothing to parse,
// Raw is the line that says it (Line). An invalid sender or assignment id
// is an error matching foreman.ErrInvalidID, with the Envelope's Body nil.
func Wrap(sender foreman.WorkerID, assignment foreman.AssignmentID, m Message, at time.Time) (Envelope, error) {
	env := Envelope{Sender: sender, Assignment: assignment, ReceivedAt: at}
	if err := sender.Validate(); err != nil {
		return env, err
	}
	if err := assignment.Validate(); err != nil {
		return env, err
	}
	if m == nil {
		return env, errors.New("message: Wrap of a nil message")
	}
	env.Body, env.Raw = m, Line(m)
	return env, nil
}

func agentsOrNA(a string) string {
	if a == "" {
		return AgentsNA
	}
	return a
}

func (Stage0Complete) Kind() Kind { return KindStage0Complete }
func (Stage0Error) Kind() Kind    { return KindStage0Error }
func (Stage1Complete) Kind() Kind { return KindStage1Complete }
func (Stage1Error) Kind() Kind    { return KindStage1Error }
func (Stage2Complete) Kind() Kind { return KindStage2Complete }
func (Stage2Error) Kind() Kind    { return KindStage2Error }
func (Stage3Complete) Kind() Kind { return KindStage3Complete }
func (Stage3Error) Kind() Kind    { return KindStage3Error }
func (StatusReply) Kind() Kind    { return KindStatusReply }
func (Callback) Kind() Kind       { return KindCallback }
func (Ack) Kind() Kind            { return KindAck }
func (ExecuteStage) Kind() Kind   { return KindExecuteStage }
func (StatusCheck) Kind() Kind    { return KindStatusCheck }
func (Shutdown) Kind() Kind       { return KindShutdown }

func (m Stage0Complete) ItemID() foreman.ItemID { return m.Item }
func (m Stage0Error) ItemID() foreman.ItemID    { return m.Item }
func (m Stage1Complete) ItemID() foreman.ItemID { return m.Item }
func (m Stage1Error) ItemID() foreman.ItemID    { return m.Item }
func (m Stage2Complete) ItemID() foreman.ItemID { return m.Item }
func (m Stage2Error) ItemID() foreman.ItemID    { return m.Item }
func (m Stage3Complete) ItemID() foreman.ItemID { return m.Item }
func (m Stage3Error) ItemID() foreman.ItemID    { return m.Item }
func (m StatusReply) ItemID() foreman.ItemID    { return m.Item }
func (m Callback) ItemID() foreman.ItemID       { return m.Subject }
func (m Ack) ItemID() foreman.ItemID            { return m.Item }
func (m ExecuteStage) ItemID() foreman.ItemID   { return m.Item }
func (m StatusCheck) ItemID() foreman.ItemID    { return m.Item }
func (m Shutdown) ItemID() foreman.ItemID       { return m.Item }

func (Stage0Complete) StageNum() int { return 0 }
func (Stage0Error) StageNum() int    { return 0 }
func (Stage1Complete) StageNum() int { return 1 }
func (Stage1Error) StageNum() int    { return 1 }
func (Stage2Complete) StageNum() int { return 2 }
func (Stage2Error) StageNum() int    { return 2 }
func (Stage3Complete) StageNum() int { return 3 }
func (Stage3Error) StageNum() int    { return 3 }
func (m StatusReply) StageNum() int  { return m.Stage }
func (Callback) StageNum() int       { return NoStage }
func (m Ack) StageNum() int          { return m.Stage }
func (m ExecuteStage) StageNum() int { return m.Stage }
func (m StatusCheck) StageNum() int  { return m.Stage }
func (m Shutdown) StageNum() int     { return NoStage }
