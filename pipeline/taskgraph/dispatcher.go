package taskgraph

import (
	"context"
	"errors"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/worker"
)

// DispatcherSpawner spawns through a worker.Dispatcher (ModeFresh gives
// a fresh worker per task). Each spawn is submitted as an item
// whose ID is the assignment id, so a re-issued spawn of a queued or
// running assignment is recognised (worker.ErrItemActive) and is a no-op.
// A spawn re-issued after its item already finished runs it again: the
// Dispatcher forgets completed items.
type DispatcherSpawner struct {
	Dispatcher *worker.Dispatcher
	// Worktree gives the directory a task's worker runs in; nil means "".
	Worktree func(SpawnRequest) string
}

// Spawn submits req to the Dispatcher.
func (d DispatcherSpawner) Spawn(ctx context.Context, req SpawnRequest) error {
	it := worker.Item{ID: foreman.ItemID(req.Assignment), Prompt: req.Prompt}
	if d.Worktree != nil {
		it.Worktree = d.Worktree(req)
	}
	err := d.Dispatcher.Submit(ctx, it)
	if errors.Is(err, worker.ErrItemActive) {
		return nil
	}
	return err
}

// WakeUpFromEvent turns a Dispatcher event about an item submitted by
// DispatcherSpawner into the callback it means: a completion, or a
// failure when the item is parked (its crash or review budget is spent).
// Requeues and other events are not callbacks (ok is false): the
// Dispatcher retries those itself.
func WakeUpFromEvent(ev worker.Event) (w WakeUp, ok bool) {
	w = WakeUp{Handler: HandleCallback, Assignment: foreman.AssignmentID(ev.Item), At: ev.At}
	switch ev.Kind {
	case worker.EventCompleted:
		w.Outcome = OutcomeCompleted
	case worker.EventParked:
		w.Outcome = OutcomeFailed
	default:
		return WakeUp{}, false
	}
	return w, ev.Item != ""
}
