package team

import (
	"context"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// EventKind is what happened.
type EventKind string

const (
	// EventStoryAdded: a story joined the plan.
	EventStoryAdded EventKind = "story_added"
	// EventStageStarted: a worker was given a stage of a story.
	EventStageStarted EventKind = "stage_started"
	// EventStageFinished: a stage's worker reported; Outcome and Detail
	// say what, Line is the report.
	EventStageFinished EventKind = "stage_finished"
	// EventReviewed: the reviewer judged a build stage's work; Outcome is
	// APPROVED or REJECTED, Detail the feedback.
	EventReviewed EventKind = "reviewed"
	// EventStoryPaused: a story waits for a person; Escalation says why
	// and what to do (Resolve).
	EventStoryPaused EventKind = "story_paused"
	// EventStoryMerged: a story landed on the target branch as Commit.
	EventStoryMerged EventKind = "story_merged"
	// EventStoryResolved: a person decided about a paused story (Action).
	EventStoryResolved EventKind = "story_resolved"
	// EventWorker: the worker pool reports trouble with a story's worker
	// (stalled, dead, failed, lost, rate-limited, waiting for a person,
	// slow but working); Detail says what and why.
	EventWorker EventKind = "worker"
	// EventRunStarted and EventRunFinished bracket a Run; Detail of the
	// latter says how it ended.
	EventRunStarted  EventKind = "run_started"
	EventRunFinished EventKind = "run_finished"
)

// Event is one thing that happened to the team. Seq numbers events from
// 1 in the order they were recorded, within one Team value.
type Event struct {
	Seq        uint64               `json:"seq"`
	Kind       EventKind            `json:"kind"`
	At         time.Time            `json:"at"`
	Story      foreman.ItemID       `json:"story,omitempty"`
	Stage      int                  `json:"stage"`
	Role       string               `json:"role,omitempty"`
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Outcome is a finished stage's outcome (COMPLETE, GO, PASS, FAIL,
	// ERROR, ...); Line the report it came from; Detail the reason,
	// issues or error, or what ended a run.
	Outcome    pipeline.Outcome     `json:"outcome,omitempty"`
	Line       string               `json:"line,omitempty"`
	Detail     string               `json:"detail,omitempty"`
	Commit     string               `json:"commit,omitempty"`
	Action     Action               `json:"action,omitempty"`
	Escalation *pipeline.Escalation `json:"escalation,omitempty"`
}

// eventLog keeps the events in memory and wakes subscribers. Appending
// never blocks: each subscriber reads from its own cursor on its own
// goroutine, so a slow one only falls behind.
type eventLog struct {
	hook func(Event)
	mu   sync.Mutex
	evs  []Event
	wake chan struct{} // closed and replaced on every append
}

func newEventLog(hook func(Event)) *eventLog {
	return &eventLog{hook: hook, wake: make(chan struct{})}
}

func (l *eventLog) add(e Event) Event {
	l.mu.Lock()
	e.Seq = uint64(len(l.evs)) + 1
	l.evs = append(l.evs, e)
	close(l.wake)
	l.wake = make(chan struct{})
	l.mu.Unlock()
	if l.hook != nil {
		l.hook(e)
	}
	return e
}

// since returns the events with Seq > after and a channel closed on the
// next append.
func (l *eventLog) since(after uint64) ([]Event, <-chan struct{}) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if after >= uint64(len(l.evs)) {
		return nil, l.wake
	}
	return append([]Event(nil), l.evs[after:]...), l.wake
}

// Events returns the events recorded after sequence number after (0: all
// of them).
func (t *Team) Events(after uint64) []Event {
	evs, _ := t.events.since(after)
	return evs
}

// Subscribe delivers the events recorded after sequence number after, and
// every later one, on the returned channel, in order, until ctx ends (then
// the channel is closed). A subscriber that does not keep up falls behind
// without holding up the team.
func (t *Team) Subscribe(ctx context.Context, after uint64) <-chan Event {
	ch := make(chan Event)
	go func() {
		defer close(ch)
		for {
			evs, wake := t.events.since(after)
			for _, e := range evs {
				select {
				case ch <- e:
					after = e.Seq
				case <-ctx.Done():
					return
				}
			}
			if len(evs) > 0 {
				continue
			}
			select {
			case <-wake:
			case <-ctx.Done():
				return
			}
		}
	}()
	return ch
}
