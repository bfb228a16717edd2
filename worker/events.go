package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/agentforeman/foreman"
)

// EventKind names a lifecycle change.
type EventKind string

// Every lifecycle change the Dispatcher and its Runtime report.
const (
	EventWorkerAdded      EventKind = "worker_added"
	EventWorkerState      EventKind = "worker_state" // From, To
	EventSubmitted        EventKind = "submitted"
	EventAssigned         EventKind = "assigned"
	EventHeartbeat        EventKind = "heartbeat"
	EventProgress         EventKind = "progress" // Reason says which event
	EventStale            EventKind = "stale_message"
	EventDuplicate        EventKind = "duplicate_message"
	EventInvalid          EventKind = "invalid_message"
	EventCompleted        EventKind = "completed"
	EventReviewRequested  EventKind = "review_requested"
	EventReviewApproved   EventKind = "review_approved"
	EventReviewRejected   EventKind = "review_rejected"
	EventQGResult         EventKind = "qg_result"
	EventFailed           EventKind = "failed"
	EventWorkerSuspicious EventKind = "worker_suspicious" // liveness expired: probing
	EventProbeAnswered    EventKind = "probe_answered"    // the suspicious worker answered
	EventWorkerDead       EventKind = "worker_dead"       // crash confirmed: the probe went unanswered
	EventWorkerStalled    EventKind = "worker_stalled"
	EventWorkerLost       EventKind = "worker_lost" // unreachable: Send failed
	EventRequeued         EventKind = "requeued"
	EventParked           EventKind = "parked"      // set aside for a person; Reason: why (its escalation)
	EventItemClosed       EventKind = "item_closed" // found closed after a crash: not requeued
	EventEscalated        EventKind = "escalated"
	EventEscalationFailed EventKind = "escalation_failed"
	EventCommandSent      EventKind = "command_sent"
	EventUsage            EventKind = "usage"
	EventShutdown         EventKind = "shutdown"
	EventAgentStarted     EventKind = "agent_started" // Runtime
	EventAgentExited      EventKind = "agent_exited"  // Runtime
	// EventRateLimited: an assignment's agent was rate-limited by its
	// provider; the item backs off until At+Delay (Reason: the provider's
	// words, ResetsAt: the reset it named). While items are rate-limited a
	// host may lower concurrency (Dispatcher.SetMaxActive, RateLimited).
	EventRateLimited EventKind = "rate_limited"
	// EventWaitingForPerson: an assignment's agent waits for a person
	// (Reason: the question); a NEEDS_PERSON escalation follows.
	EventWaitingForPerson EventKind = "waiting_for_person"
	// EventSlowWorker: a worker's progress deadline passed but it showed
	// evidence of work (Reason says which); it gets an extension instead
	// of being killed.
	EventSlowWorker EventKind = "slow_worker"
)

// AllEvents returns every EventKind the package defines, in declaration
// order.
func AllEvents() []EventKind {
	return []EventKind{
		EventWorkerAdded, EventWorkerState, EventSubmitted, EventAssigned, EventHeartbeat, EventProgress,
		EventStale, EventDuplicate, EventInvalid, EventCompleted, EventReviewRequested, EventReviewApproved,
		EventReviewRejected, EventQGResult, EventFailed, EventWorkerSuspicious, EventProbeAnswered,
		EventWorkerDead, EventWorkerStalled, EventWorkerLost, EventRequeued, EventParked, EventItemClosed,
		EventEscalated, EventEscalationFailed, EventCommandSent, EventUsage, EventShutdown,
		EventAgentStarted, EventAgentExited, EventRateLimited, EventWaitingForPerson, EventSlowWorker,
	}
}

// Event is one lifecycle change. Fields that do not apply are zero.
type Event struct {
	Kind       EventKind
	At         time.Time
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	Item       foreman.ItemID
	From, To   WorkerState
	Message    MessageKind
	Command    CommandKind
	Attempt    int
	Reason     string
	Usage      Usage
	Escalation *Escalation
	Err        error
	// ResetsAt and Delay: for EventRateLimited, the reset the provider
	// named (zero if none) and the backoff before the item is queued
	// again; for EventSlowWorker, Delay is the extension granted.
	ResetsAt time.Time
	Delay    time.Duration
}

// EventHook receives every Event. Calls are serialized in the order the
// changes happened and made without the Dispatcher's lock held; the hook may
// read the Dispatcher but should not block for long.
type EventHook func(Event)

// SlogEvents returns a hook that logs every event to l: heartbeats at
// Debug, stale, duplicate and invalid messages and failures at Warn,
// escalations at Error, the rest at Info.
func SlogEvents(l *slog.Logger) EventHook {
	if l == nil {
		return func(Event) {}
	}
	return func(e Event) {
		level := slog.LevelInfo
		switch e.Kind {
		case EventHeartbeat, EventProgress, EventWorkerState, EventCommandSent, EventUsage:
			level = slog.LevelDebug
		case EventStale, EventDuplicate, EventInvalid, EventFailed, EventWorkerSuspicious, EventWorkerDead, EventWorkerLost, EventEscalationFailed,
			EventRateLimited, EventSlowWorker, EventWaitingForPerson:
			level = slog.LevelWarn
		case EventEscalated, EventWorkerStalled:
			level = slog.LevelError
		}
		ctx := context.Background()
		if !l.Enabled(ctx, level) {
			return
		}
		attrs := make([]slog.Attr, 0, 10)
		add := func(a slog.Attr) { attrs = append(attrs, a) }
		if e.Worker != "" {
			add(slog.String("worker", string(e.Worker)))
		}
		if e.Assignment != "" {
			add(slog.String("assignment", string(e.Assignment)))
		}
		if e.Item != "" {
			add(slog.String("item", string(e.Item)))
		}
		if e.Kind == EventWorkerState {
			add(slog.String("from", e.From.String()))
			add(slog.String("to", e.To.String()))
		}
		if e.Message != 0 {
			add(slog.String("message", e.Message.String()))
		}
		if e.Command != 0 {
			add(slog.String("command", e.Command.String()))
		}
		if e.Attempt != 0 {
			add(slog.Int("attempt", e.Attempt))
		}
		if e.Reason != "" {
			add(slog.String("reason", e.Reason))
		}
		if e.Usage != (Usage{}) {
			add(slog.Int64("tokens", e.Usage.Tokens))
			add(slog.Float64("cost_usd", e.Usage.CostUSD))
		}
		if e.Delay != 0 {
			add(slog.Duration("delay", e.Delay))
		}
		if !e.ResetsAt.IsZero() {
			add(slog.Time("resets_at", e.ResetsAt))
		}
		if e.Escalation != nil {
			add(slog.String("escalation", string(e.Escalation.Kind)))
			add(slog.String("suggested_action", e.Escalation.SuggestedAction))
		}
		if e.Err != nil {
			add(slog.String("error", e.Err.Error()))
		}
		l.LogAttrs(ctx, level, "worker: "+string(e.Kind), attrs...)
	}
}
