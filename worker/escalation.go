package worker

import (
	"context"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
)

//go:generate go tool mockgen -destination workermock/mocks.go -package workermock github.com/agentforeman/foreman/worker Transport,Inbox,Closer,Escalator,CommitReader

// EscalationKind says why a person is asked to act.
type EscalationKind string

const (
	// StuckWorker: heartbeating but no progress within ProgressTimeout (or
	// over the attempt deadline). The worker was killed.
	StuckWorker EscalationKind = "STUCK_WORKER"
	// ReviewLimit: rejected by reviewers more than MaxReviewRejections times.
	ReviewLimit EscalationKind = "REVIEW_LIMIT"
	// CrashLimit: the item's agents failed, or its workers fell silent and
	// did not answer their probe, more than CrashBudget times.
	CrashLimit EscalationKind = "CRASH_LIMIT"
	// ItemCheckFailed: a worker crashed within the crash budget, but
	// Config.ItemChecker could not tell whether the item is still open, and
	// requeueing closed work is worse than waiting for a person.
	ItemCheckFailed EscalationKind = "ITEM_CHECK_FAILED"
	// StuckQG: StuckQGIdentical of the item's last StuckQGWindow failing
	// quality-gate outputs were identical: another retry will not help.
	StuckQG EscalationKind = "STUCK_QG"
	// BudgetExceeded: the item's or the dispatcher's token or cost budget
	// is spent.
	BudgetExceeded EscalationKind = "BUDGET"
	// NeedsPerson: the agent is waiting for a person: it asked a question
	// or was refused a permission it needs (Question says which). Not a
	// crash; nothing answers it automatically. The item is parked: answer
	// the question (in Item.MemoryContext) or grant the permission, then
	// submit it again.
	NeedsPerson EscalationKind = "NEEDS_PERSON"
)

// Escalation asks a person to act, so it is actionable: what happened to
// which item at which stage, by which worker and assignment, the counters
// that led there, and what to do next.
type Escalation struct {
	Kind       EscalationKind
	Item       foreman.ItemID // empty for a dispatcher-wide budget
	Stage      int
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Reason     string
	// Requeued: the item went back to the queue and will be retried; when
	// false it is Parked until submitted again.
	Requeued bool

	Attempt             int
	Rejections          int
	MaxReviewRejections int
	Crashes             int
	CrashBudget         int
	Stalls              int
	StallBudget         int
	// QGRepeats of the last QGWindow quality-gate outputs were identical
	// (STUCK_QG); QGStreak of them came in a row at the end.
	QGRepeats int
	QGWindow  int
	QGStreak  int
	// Question is what a NEEDS_PERSON agent asked or was refused.
	Question   string
	ItemUsage  Usage
	TotalUsage Usage

	SuggestedAction string
	At              time.Time
}

// Escalator hands an escalation to a person (or whatever stands for one).
type Escalator interface {
	Escalate(ctx context.Context, e Escalation) error
}

// EscalatorFunc adapts a function to Escalator.
type EscalatorFunc func(ctx context.Context, e Escalation) error

// Escalate calls f.
func (f EscalatorFunc) Escalate(ctx context.Context, e Escalation) error { return f(ctx, e) }

// Health converts e for a health.Escalator, so one escalation channel can
// serve both packages. Kind and counters that health has no field for are
// folded into Message and Detail.
func (e Escalation) Health() health.Escalation {
	return health.Escalation{
		Item:            e.Item,
		Stage:           e.Stage,
		Assignment:      e.Assignment,
		Worker:          e.Worker,
		Message:         string(e.Kind) + ": " + e.Reason,
		Crashes:         e.Crashes,
		CrashBudget:     e.CrashBudget,
		SuggestedAction: e.SuggestedAction,
		At:              e.At,
	}
}

// HealthEscalator forwards escalations to a health.Escalator.
func HealthEscalator(h health.Escalator) Escalator {
	return EscalatorFunc(func(ctx context.Context, e Escalation) error { return h.Escalate(ctx, e.Health()) })
}

func suggestedAction(k EscalationKind, requeued bool) string {
	switch k {
	case StuckWorker:
		if requeued {
			return "The worker was killed and the item requeued; if it stalls again, read the agent's last output and split or clarify the task."
		}
		return "The item stalled more often than the stall budget allows and is parked: read the agent's last output, fix the task or the environment, then submit it again."
	case ReviewLimit:
		return "Reviewers rejected the work too often: read their feedback, rewrite the task or fix the code by hand, then submit the item again."
	case CrashLimit:
		return "Workers on this item keep dying: check the agent's stderr, the machine and the worktree, then submit the item again."
	case ItemCheckFailed:
		return "Check the item's status in your tracker: if it is still open, submit it again; if it is closed, leave it (reassigning closed work redoes it)."
	case StuckQG:
		return "The quality gate fails the same way every time: fix the failing check or the test by hand, then submit the item again."
	case NeedsPerson:
		return "The agent is waiting for a person: answer its question (add the answer to the item's MemoryContext) or grant the permission it was refused, then submit the item again."
	case BudgetExceeded:
		return "The token or cost budget is spent: raise the budget in Config or finish the work by hand; work already running may have overshot it."
	}
	return "Investigate the item."
}
