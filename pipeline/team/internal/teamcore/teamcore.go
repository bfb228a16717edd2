package teamcore

// The pure decisions: what a verified report puts on the board, what a
// task graph spawn means for a story, and what a story's state means to
// the task graph. Functions of their inputs only: no I/O, no clock.

import (
	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// Board is the team's board entry for a story: what the stage runner
// verified, which the flow's board checks read.
type Board struct {
	Status string `json:"status"`
	Tasks  int    `json:"tasks"`
}

// ReportOfLine is the stage report a report line about stage carries (a
// simulated agent's line, parsed here); ok is false for a line that is no
// stage report.
func ReportOfLine(stage int, line string) (message.Report, bool) {
	m, err := message.Parse(line)
	if err != nil {
		return message.Report{}, false
	}
	r, ok := message.ReportOf(m)
	r.Stage = stage
	return r, ok
}

// BoardAfterReport is the board entry a verified report leads to: the
// status and task count the flow's rule for the report checks. ok is false
// when the report needs no board.
func BoardAfterReport(flow *pipeline.Flow, r message.Report, cur Board) (Board, bool) {
	outcome := pipeline.Outcome(r.Outcome)
	if !flow.NeedsBoard(r.Stage, outcome) {
		return cur, false
	}
	for _, rule := range flow.Stages[r.Stage].Rules {
		if rule.Outcome != outcome {
			continue
		}
		next := cur
		if rule.Check.TasksExist {
			next.Tasks = r.Tasks
		}
		if rule.Check.Status != "" {
			next.Status = rule.Check.Status
		}
		return next, true
	}
	return cur, false
}

// StoryMove is what the team does when the task graph gives a story an
// assignment.
type StoryMove uint8

// The moves SpawnMove decides between.
const (
	MoveNothing StoryMove = iota // running already, or finished: just observe
	MoveStart                    // a new story: start its flow
	MoveResolve                  // paused, with a person's retry or resume: restart at the decided stage
	MoveRespawn                  // in flight after a restart: its current stage gets its worker again
	// MoveProbeLost: in flight after a restart, with its worker probed
	// by the crashed process: that probe's answer was lost with it, and
	// nobody works on the assignment now, so the probe has timed out.
	MoveProbeLost
)

// SpawnMove decides what a spawn of a story means, from its flow state and
// whether a person decided to send it back to work (retry or resume). A
// spawn of a story that is in flight happens only after a restart (the
// graph re-issues its in-progress tasks), when no worker of the crashed
// process is alive.
func SpawnMove(st pipeline.State, restart bool) StoryMove {
	switch st.Status {
	case pipeline.StatusNew:
		return MoveStart
	case pipeline.StatusPaused:
		if restart {
			return MoveResolve
		}
	case pipeline.StatusActive:
		switch {
		case st.Assignment == "":
		case st.Crash.Phase == health.Working:
			return MoveRespawn
		case st.Crash.Phase == health.Probing:
			return MoveProbeLost
		}
		// Otherwise the crash protocol is under way and is left to it.
	}
	return MoveNothing
}

// GraphMove is what the task graph is told about a story's flow state.
type GraphMove uint8

// The moves GraphMoveFor decides between.
const (
	GraphNothing  GraphMove = iota // still working
	GraphComplete                  // DONE: complete the task, unblocking its dependents
	GraphPark                      // PAUSED: park the task, which keeps its dependents blocked
)

// GraphMoveFor decides what the task graph hears about a story's state.
func GraphMoveFor(st pipeline.State) GraphMove {
	switch st.Status {
	case pipeline.StatusDone:
		return GraphComplete
	case pipeline.StatusPaused:
		return GraphPark
	}
	return GraphNothing
}

// GraphCore is the task graph of a team with workers stories in flight:
// one role for every story, no checkpoints.
func GraphCore(workers int) taskgraph.CoreConfig {
	return taskgraph.CoreConfig{Roles: []string{StoryRole}, NoCheckpoints: true, MaxActive: workers}
}

// TaskSpec is a story's task in the graph: blocked by the stories it
// comes after.
func TaskSpec(id foreman.ItemID, title string, after []foreman.ItemID) taskgraph.TaskSpec {
	spec := taskgraph.TaskSpec{Subject: string(id), Role: StoryRole, Description: title}
	for _, a := range after {
		spec.BlockedBy = append(spec.BlockedBy, string(a))
	}
	return spec
}
