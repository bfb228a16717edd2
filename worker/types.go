package worker

import (
	"context"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

// Mode says how workers live.
type Mode uint8

const (
	// ModePooled keeps MaxWorkers long-lived workers that take successive
	// assignments. The default.
	ModePooled Mode = iota
	// ModeFresh spawns a fresh worker for every assignment and shuts it
	// down after: no context leaks from one stage or attempt into the
	// next. At most MaxWorkers run at once.
	ModeFresh
)

func (m Mode) String() string {
	if m == ModeFresh {
		return "fresh"
	}
	return "pooled"
}

// Item is a unit of ready work submitted to the Dispatcher.
type Item struct {
	ID foreman.ItemID
	// Stage is the flow stage this work is for (0 for a plain task); it is
	// carried into the assignment and escalations.
	Stage int
	// Priority orders the queue: higher first, FIFO among equals.
	Priority int
	// Prompt is the task given to the agent.
	Prompt string
	// Worktree is the directory the agent works in (the item's worktree).
	Worktree string
	// MemoryContext is context from earlier sessions; reviewers' feedback
	// is appended to it on every reassignment after a rejection.
	MemoryContext string
	// RequireReview makes a successful agent report READY_FOR_REVIEW rather
	// than DONE; the host then calls Dispatcher.Review.
	RequireReview bool
}

// Assignment is one attempt by one worker at one item: what a worker is
// told to do. ID is the fencing token every message about it must carry.
type Assignment struct {
	ID       foreman.AssignmentID
	Worker   foreman.WorkerID
	Item     foreman.ItemID
	Stage    int
	Prompt   string
	Worktree string
	// Attempt counts assignments of this item, this one included (1-based).
	Attempt int
	// MemoryContext holds the item's own context followed by every earlier
	// reviewer's feedback, oldest first.
	MemoryContext string
	// Feedback is the latest reviewer's feedback, empty on a first attempt.
	Feedback      string
	RequireReview bool
}

// CommandKind is what the Dispatcher tells a worker.
type CommandKind uint8

const (
	// CommandAssign starts an assignment on the worker. Any per-assignment
	// state the worker holds (pending QG output, session text) is cleared.
	CommandAssign CommandKind = iota + 1
	// CommandKill terminates the assignment's agent process group now.
	CommandKill
	// CommandReset terminates the assignment's process group and clears the
	// worker's per-assignment state: it stays in the pool for new work.
	CommandReset
	// CommandShutdown stops the worker for good (fresh workers after their
	// assignment, every worker at shutdown).
	CommandShutdown
	// CommandProbe asks a worker that fell silent whether it is still
	// working on the assignment; Reason holds the question
	// (health.ProbeText). Any message of that assignment answers it; the
	// Runtime replies with a MsgStatus of StatusAlive while the agent's
	// execution is running. No answer within ProbeTimeout is a crash.
	CommandProbe
)

var commandNames = [...]string{"", "ASSIGN", "KILL", "RESET", "SHUTDOWN", "PROBE"}

func (k CommandKind) String() string {
	if int(k) < len(commandNames) && k != 0 {
		return commandNames[k]
	}
	return "UNKNOWN"
}

// Command is addressed to one worker. Assignment names the assignment it
// concerns; for CommandAssign, Assign holds the whole assignment.
type Command struct {
	Kind       CommandKind
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Assign     *Assignment
	Reason     string
}

// MessageKind is what a worker reports.
type MessageKind uint8

const (
	// MsgHeartbeat: the worker's runtime is alive. It moves only the
	// liveness deadline, except that a new commit counts as progress.
	MsgHeartbeat MessageKind = iota + 1
	// MsgStatus: a state report; the first "running" one is progress. It
	// also answers a probe (as does any message of the assignment).
	MsgStatus
	// MsgDone: the assignment is complete.
	MsgDone
	// MsgReadyForReview: the work awaits a reviewer (Dispatcher.Review).
	MsgReadyForReview
	// MsgQGResult: a quality-gate run finished, pass or fail.
	MsgQGResult
	// MsgFailed: the agent exited unsuccessfully or crashed.
	MsgFailed
	// MsgRateLimited: the agent stopped because its provider refused it
	// for a rate or usage limit; ResetsAt is the reset the provider named
	// (zero if none). Not a crash: the item is retried after a backoff,
	// not before ResetsAt.
	MsgRateLimited
	// MsgNeedsPerson: the agent is waiting for a person (a question it
	// asked, a permission it was refused); Question holds the text. Not a
	// crash: the item is escalated NEEDS_PERSON and parked, never
	// answered by automation.
	MsgNeedsPerson
)

var messageNames = [...]string{"", "HEARTBEAT", "STATUS", "DONE", "READY_FOR_REVIEW", "QG_RESULT", "FAILED", "RATE_LIMITED", "NEEDS_PERSON"}

func (k MessageKind) String() string {
	if int(k) < len(messageNames) && k != 0 {
		return messageNames[k]
	}
	return "UNKNOWN"
}

// Statuses a MsgStatus carries.
const (
	// StatusRunning counts as progress the first time an assignment
	// reports it.
	StatusRunning = "running"
	// StatusAlive is the Runtime's answer to a CommandProbe: the agent's
	// execution is still running. It is not progress.
	StatusAlive = "alive"
)

// Message is what a worker sends. Worker and Assignment fence it: a message
// whose assignment is not the worker's current one is stale and never applied.
type Message struct {
	Kind       MessageKind
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	// Status is the state a MsgStatus reports (StatusRunning, ...).
	Status string
	// LastOutput is when the agent last produced output (heartbeats).
	LastOutput time.Time
	// Commit is the worktree's HEAD as the runtime last read it
	// (heartbeats); a change from the previous one is progress.
	Commit string
	// QGPassed and QGOutput are a MsgQGResult's result.
	QGPassed bool
	QGOutput string
	// Reason says why a MsgFailed failed (or what a MsgRateLimited
	// provider said).
	Reason string
	// ResetsAt is when a MsgRateLimited's limit resets, zero if unknown.
	ResetsAt time.Time
	// Question is what a MsgNeedsPerson's agent is waiting for a person
	// to answer or allow.
	Question string
	// Usage is what the agent consumed during this assignment so far, not
	// yet reported; it counts against the budgets.
	Usage Usage
}

// Usage is tokens and money spent.
type Usage struct {
	Tokens  int64
	CostUSD float64
}

// UsageOf reads the usage of one agent execution.
func UsageOf(r phases.AgentResult) Usage {
	return Usage{Tokens: r.Tokens.Total(), CostUSD: r.CostUSD}
}

func (u Usage) add(o Usage) Usage { return Usage{u.Tokens + o.Tokens, u.CostUSD + o.CostUSD} }

// Budget bounds usage. A zero field is unlimited.
type Budget struct {
	Tokens  int64
	CostUSD float64
}

func (b Budget) exceededBy(u Usage) bool {
	return (b.Tokens > 0 && u.Tokens > b.Tokens) || (b.CostUSD > 0 && u.CostUSD > b.CostUSD)
}

// Disposition is what the Dispatcher did with a message.
type Disposition uint8

const (
	// Applied: the message was current and took effect.
	Applied Disposition = iota + 1
	// Stale: the assignment is not the worker's current one (finished,
	// reassigned, or never issued). Ignored, logged and counted.
	Stale
	// Duplicate: a completion already processed for this assignment. The
	// transport may acknowledge it again; it is not reprocessed. Counted.
	Duplicate
	// Invalid: the message is malformed, or not allowed in the worker's
	// state (the error says which). Ignored and counted.
	Invalid
)

var dispositionNames = [...]string{"", "applied", "stale", "duplicate", "invalid"}

func (d Disposition) String() string {
	if int(d) < len(dispositionNames) && d != 0 {
		return dispositionNames[d]
	}
	return "unknown"
}

// Transport carries commands from the Dispatcher to workers. Messages travel
// back through an Inbox (the Dispatcher). The default is the in-process
// Runtime; a network or database transport implements the same interface.
// Send must not block for long and must not call back into the Dispatcher
// synchronously. A Send error means the worker could not be reached: the
// Dispatcher drops that worker and requeues its item.
type Transport interface {
	Send(ctx context.Context, c Command) error
}

// Inbox receives workers' messages; *Dispatcher is one.
type Inbox interface {
	Deliver(ctx context.Context, m Message) (Disposition, error)
}

// Closer is implemented by transports that own workers: Dispatcher.Shutdown
// calls it last and reports what it returns (the workers that did not stop).
type Closer interface {
	Close(ctx context.Context) error
}
