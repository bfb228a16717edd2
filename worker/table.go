package worker

import (
	"errors"
	"fmt"
)

// WorkerState is where a worker stands in the pool.
type WorkerState uint8

const (
	// Idle: no assignment; eligible for tryAssign.
	Idle WorkerState = iota
	// Reserved: picked for an assignment that has not been sent yet.
	Reserved
	// Busy: working on an assignment; liveness and progress are watched.
	Busy
	// Reviewing: the assignment's work awaits a reviewer's verdict.
	Reviewing
	// ShuttingDown: told to stop; takes no work.
	ShuttingDown
	// Stopped: gone (a fresh worker after its assignment, an unreachable
	// worker, everyone after shutdown). Stopped workers leave the pool.
	Stopped
)

var workerStateNames = [...]string{"Idle", "Reserved", "Busy", "Reviewing", "ShuttingDown", "Stopped"}

func (s WorkerState) String() string {
	if int(s) < len(workerStateNames) {
		return workerStateNames[s]
	}
	return fmt.Sprintf("WorkerState(%d)", s)
}

// WorkerEvent moves a worker between states.
type WorkerEvent uint8

const (
	// WorkerReserve: tryAssign picked the worker.
	WorkerReserve WorkerEvent = iota
	// WorkerStart: the assignment was sent.
	WorkerStart
	// WorkerReadyForReview: the worker asked for review.
	WorkerReadyForReview
	// WorkerReassign: a rejected assignment goes back to the same worker.
	WorkerReassign
	// WorkerRelease: the assignment ended (done, failed, killed,
	// escalated); the worker is free again.
	WorkerRelease
	// WorkerShutdown: the worker is told to stop.
	WorkerShutdown
	// WorkerGone: the worker stopped, or could not be reached.
	WorkerGone
)

var workerEventNames = [...]string{"Reserve", "Start", "ReadyForReview", "Reassign", "Release", "Shutdown", "Gone"}

func (e WorkerEvent) String() string {
	if int(e) < len(workerEventNames) {
		return workerEventNames[e]
	}
	return fmt.Sprintf("WorkerEvent(%d)", e)
}

type workerKey struct {
	from WorkerState
	ev   WorkerEvent
}

// workerTable is every allowed worker transition; anything else is a
// *TransitionError.
var workerTable = map[workerKey]WorkerState{
	{Idle, WorkerReserve}:                Reserved,
	{Reserved, WorkerStart}:              Busy,
	{Busy, WorkerReadyForReview}:         Reviewing,
	{Reviewing, WorkerReassign}:          Reserved,
	{Reserved, WorkerRelease}:            Idle,
	{Busy, WorkerRelease}:                Idle,
	{Reviewing, WorkerRelease}:           Idle,
	{Idle, WorkerShutdown}:               ShuttingDown,
	{Reserved, WorkerShutdown}:           ShuttingDown,
	{Busy, WorkerShutdown}:               ShuttingDown,
	{Reviewing, WorkerShutdown}:          ShuttingDown,
	{ShuttingDown, WorkerGone}:           Stopped,
	{Idle, WorkerGone}:                   Stopped,
	{Reserved, WorkerGone}:               Stopped,
	{Busy, WorkerGone}:                   Stopped,
	{Reviewing, WorkerGone}:              Stopped,
	{ShuttingDown, WorkerShutdown}:       ShuttingDown,
	{Stopped, WorkerGone}:                Stopped,
	{Stopped, WorkerShutdown}:            Stopped,
	{ShuttingDown, WorkerRelease}:        ShuttingDown,
	{ShuttingDown, WorkerReadyForReview}: ShuttingDown,
}

// workerNext is workerTable as an array, indexed by state and event: every
// move of every worker looks it up (a map lookup hashed the pair each
// time). Its entries are the target state plus one; zero is no transition.
var workerNext = func() (t [len(workerStateNames)][len(workerEventNames)]uint8) {
	for k, to := range workerTable {
		t[k.from][k.ev] = uint8(to) + 1
	}
	return t
}()

// NextWorkerState applies ev to s using the transition table.
func NextWorkerState(s WorkerState, ev WorkerEvent) (WorkerState, error) {
	if int(s) < len(workerNext) && int(ev) < len(workerNext[s]) {
		if to := workerNext[s][ev]; to != 0 {
			return WorkerState(to - 1), nil
		}
	}
	return s, &TransitionError{Machine: "worker", From: s.String(), Event: ev.String()}
}

// ItemState is where a submitted item stands.
type ItemState uint8

const (
	// Queued: ready, waiting for a worker.
	Queued ItemState = iota
	// Assigned: a worker holds a current assignment for it.
	Assigned
	// InReview: its work awaits a reviewer.
	InReview
	// Done: completed. Terminal until resubmitted.
	Done
	// Parked: escalated; a person decides (Submit it again to retry).
	Parked
	// Recovering: its worker's crash was confirmed; the Dispatcher is
	// checking that the item is still open (Config.ItemChecker) before it
	// requeues it.
	Recovering
	// RateLimited: its agent's provider refused it for a rate limit; it
	// waits out a backoff (not before the reset the provider named) and
	// is then queued again.
	RateLimited
)

var itemStateNames = [...]string{"Queued", "Assigned", "InReview", "Done", "Parked", "Recovering", "RateLimited"}

func (s ItemState) String() string {
	if int(s) < len(itemStateNames) {
		return itemStateNames[s]
	}
	return fmt.Sprintf("ItemState(%d)", s)
}

// ItemEvent moves an item between states.
type ItemEvent uint8

const (
	ItemAssign ItemEvent = iota
	ItemReadyForReview
	ItemReassign
	ItemRequeue
	ItemComplete
	ItemPark
	ItemResubmit
	// ItemRecover: the worker holding it crashed (probe unanswered).
	ItemRecover
	// ItemClose: it was found closed while recovering; it leaves the
	// Dispatcher as Done without being reassigned.
	ItemClose
	// ItemRateLimit: its agent was rate-limited; it backs off.
	ItemRateLimit
)

var itemEventNames = [...]string{"Assign", "ReadyForReview", "Reassign", "Requeue", "Complete", "Park", "Resubmit", "Recover", "Close", "RateLimit"}

func (e ItemEvent) String() string {
	if int(e) < len(itemEventNames) {
		return itemEventNames[e]
	}
	return fmt.Sprintf("ItemEvent(%d)", e)
}

type itemKey struct {
	from ItemState
	ev   ItemEvent
}

var itemTable = map[itemKey]ItemState{
	{Queued, ItemAssign}:           Assigned,
	{Assigned, ItemReadyForReview}: InReview,
	{InReview, ItemReassign}:       Assigned,
	{Assigned, ItemRequeue}:        Queued,
	{InReview, ItemRequeue}:        Queued,
	{Assigned, ItemComplete}:       Done,
	{InReview, ItemComplete}:       Done,
	{Queued, ItemPark}:             Parked,
	{Assigned, ItemPark}:           Parked,
	{InReview, ItemPark}:           Parked,
	{Parked, ItemResubmit}:         Queued,
	{Done, ItemResubmit}:           Queued,
	{Assigned, ItemRecover}:        Recovering,
	{Recovering, ItemRequeue}:      Queued,
	{Recovering, ItemPark}:         Parked,
	{Recovering, ItemClose}:        Done,
	{Assigned, ItemRateLimit}:      RateLimited,
	{RateLimited, ItemRequeue}:     Queued,
}

// itemNext is itemTable as an array (see workerNext).
var itemNext = func() (t [len(itemStateNames)][len(itemEventNames)]uint8) {
	for k, to := range itemTable {
		t[k.from][k.ev] = uint8(to) + 1
	}
	return t
}()

// NextItemState applies ev to s using the transition table.
func NextItemState(s ItemState, ev ItemEvent) (ItemState, error) {
	if int(s) < len(itemNext) && int(ev) < len(itemNext[s]) {
		if to := itemNext[s][ev]; to != 0 {
			return ItemState(to - 1), nil
		}
	}
	return s, &TransitionError{Machine: "item", From: s.String(), Event: ev.String()}
}

// ErrInvalidTransition is matched by every *TransitionError.
var ErrInvalidTransition = errors.New("worker: invalid transition")

// TransitionError is an event that is not allowed in a state.
type TransitionError struct {
	Machine string // "worker" or "item"
	From    string
	Event   string
}

func (e *TransitionError) Error() string {
	return fmt.Sprintf("worker: %s in state %s: event %s not allowed", e.Machine, e.From, e.Event)
}

// Is matches ErrInvalidTransition.
func (e *TransitionError) Is(target error) bool { return target == ErrInvalidTransition }
