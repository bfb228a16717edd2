package teamcore

import (
	"context"
	"errors"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// Decision is a person's decision about a paused story, as the
// coordinator acts on it.
type Decision struct {
	// To is what the story's parked task becomes: Pending (a retry or a
	// resume: the next spawn restarts the flow at Stage with Feedback),
	// Completed (skipped: its dependents may start) or Cancelled
	// (abandoned: they stay blocked).
	To       taskgraph.Status
	Stage    int
	Feedback string
	At       time.Time
	// Pause is the key of the pause decided about (pipeline.Escalation's
	// Key); "" decides whatever pause the story is in. A decision for an
	// earlier pause (one the flow acted on, whose record a crash kept) is
	// no decision about a later one.
	Pause string
}

// About reports whether d decides the pause the story is in (st).
func (d Decision) About(st pipeline.State) bool {
	return d.Pause == "" || (st.Pause != nil && st.Pause.Key == d.Pause)
}

// Restarts reports whether the decision sends the story back to work.
func (d Decision) Restarts() bool { return d.To == taskgraph.Pending }

// ResolveStage is the stage a retry (resume false) or a resume restarts a
// story paused at stage in a flow of n stages: a resume goes on from the
// next stage, or repeats the last one (which re-checks and merges).
func ResolveStage(resume bool, stage, n int) int {
	if resume && stage+1 < n {
		return stage + 1
	}
	return stage
}

// ApplyDecision carries a person's decision to the task graph, if the
// story's task is still parked: released (retry, resume), completed
// (skip) or cancelled (abandon). Idempotent: Resolve and a Run starting
// up both carry it, and whoever comes second finds the task released.
func ApplyDecision(ctx context.Context, g Graph, item foreman.ItemID, d Decision) error {
	sess, _, err := g.Load(ctx, GraphSession)
	if err != nil {
		return err
	}
	task, ok := sess.Graph.Task(string(item))
	if !ok || task.Status != taskgraph.Parked {
		return nil
	}
	_, err = g.Update(ctx, GraphSession, taskgraph.TaskUpdate{Task: string(item), To: d.To, Assignment: task.Assignment, At: d.At})
	if errors.Is(err, taskgraph.ErrInvalidTransition) {
		if sess, _, lerr := g.Load(ctx, GraphSession); lerr == nil {
			if task, ok := sess.Graph.Task(string(item)); ok && task.Status != taskgraph.Parked {
				return nil
			}
		}
	}
	return err
}
