package team

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// Source is where a team's stories come from: a stories file (Plan is
// one), an issue tracker (package pipeline/team/ghsource), a host's own.
// A Follower polls it and keeps the team in step.
type Source interface {
	// List returns the stories the source has now, each with the stories
	// it comes After (all of them in the listing or already in the team),
	// and, among notStarted (the team's stories that have not started),
	// those the source withdraws. Listing a story again is harmless: the
	// team adds a story once, and a story's definition never changes once
	// added (an edit at the source is not taken).
	List(ctx context.Context, notStarted []foreman.ItemID) (Listing, error)
}

// Listing is what a Source has now.
type Listing struct {
	Stories []Story
	Dropped []Dropped
}

// Dropped is a story its source withdrew before it started (an issue that
// lost its label, or was closed).
type Dropped struct {
	Story foreman.ItemID
	// Cause says why, in words for the person reading the events.
	Cause string
	// Unblock lets the stories after it start as if it had merged (the
	// source says the work is done or no longer needed: a closed issue);
	// otherwise they stay blocked, as after an abandoned story.
	Unblock bool
}

// Reporter is a Source that is told what becomes of its stories (a
// comment and a label on the issue, the issue closed on merge).
type Reporter interface {
	// Report writes r back to the source. The same Key is the same
	// report: a Reporter writes it once, also when it is asked again
	// after a crash between its write and the Follower's record of it
	// (it finds its earlier write at the source). A story that is not
	// the source's is no error: Report does nothing.
	Report(ctx context.Context, r StoryReport) error
}

// ReportKind is what happened to a story, as a Reporter is told.
type ReportKind string

const (
	// ReportStarted: the story's first stage started (once per story).
	ReportStarted ReportKind = "started"
	// ReportPaused: the story waits for a person; Cause says why.
	ReportPaused ReportKind = "paused"
	// ReportMerged: the story landed as Commit (once per story).
	ReportMerged ReportKind = "merged"
)

// StoryReport is one change of a story's state, for its Source.
type StoryReport struct {
	Story foreman.ItemID
	Kind  ReportKind
	// Key names the report for good ("started", "merged", "paused-<seq>"
	// with the event's sequence number): the Reporter's idempotency key.
	Key    string
	Cause  string
	Commit string
	At     time.Time
}

// List makes a Plan a Source: its stories, none ever withdrawn.
func (p Plan) List(context.Context, []foreman.ItemID) (Listing, error) {
	return Listing{Stories: p.Stories}, nil
}

// EventStoryDropped: a story's source withdrew it before it started
// (Drop); Detail says why, Action is Skip (the stories after it may start)
// or Abandon (they stay blocked).
const EventStoryDropped EventKind = "story_dropped"

// ErrStarted is matched when Drop is asked about a story that has started
// (or was resolved by a person): it is not dropped.
var ErrStarted = errors.New("team: the story has started")

// Drop withdraws a story that has not started: it will not be worked on,
// its status says skipped (d.Unblock: the stories after it may start) or
// abandoned (they stay blocked), with d.Cause as its decision's note, and
// an EventStoryDropped records it. A story that has started is not
// dropped (ErrStarted): the check and the withdrawal are one step of the
// task graph, so a story cannot start in between. Drop is idempotent: a
// story dropped before is no error and no second event.
func (t *Team) Drop(ctx context.Context, d Dropped) error {
	if _, ok := t.story(d.Story); !ok {
		return fmt.Errorf("%w: %s", ErrUnknownStory, d.Story)
	}
	prev, err := t.decisionOf(ctx, d.Story)
	if err != nil {
		return err
	}
	if prev != nil {
		if prev.Dropped {
			return nil
		}
		return fmt.Errorf("%w: %s was resolved (%s)", ErrStarted, d.Story, prev.Action)
	}
	action, to := Abandon, taskgraph.Cancelled
	if d.Unblock {
		action, to = Skip, taskgraph.Completed
	}
	now := t.clk.Now()
	_, err = t.graph.Update(ctx, graphSession, taskgraph.TaskUpdate{Task: string(d.Story), To: to,
		From: []taskgraph.Status{taskgraph.Pending}, At: now})
	var te *taskgraph.TransitionError
	if errors.As(err, &te) {
		st, gerr := t.pipe.Get(ctx, d.Story)
		if gerr != nil {
			return gerr
		}
		// Withdrawn before a crash kept the decision from being written:
		// the graph says so, and the pipeline never saw the story.
		if (te.From != taskgraph.Cancelled && te.From != taskgraph.Completed) || st.Status != pipeline.StatusNew {
			return fmt.Errorf("%w: %s is %s", ErrStarted, d.Story, te.From)
		}
		if te.From == taskgraph.Completed {
			action = Skip
		} else {
			action = Abandon
		}
	} else if err != nil {
		return err
	}
	data, err := jsonMarshal(decision{Action: action, Stage: 0, Note: d.Cause, At: now, Dropped: true})
	if err != nil {
		return err
	}
	if _, err := t.db.Apply(ctx, store.Op{Kind: kindDecision, ID: string(d.Story), Data: data}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return nil // dropped at the same time by another caller
		}
		return err
	}
	t.events.add(Event{Kind: EventStoryDropped, At: now, Story: d.Story, Action: action, Detail: d.Cause})
	t.mu.Lock()
	if t.run != nil {
		t.run.wake(taskgraph.WakeUp{Text: "next"})
	}
	t.mu.Unlock()
	return nil
}
