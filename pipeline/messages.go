package pipeline

import (
	"strconv"

	"github.com/agentforeman/foreman/pipeline/message"
)

// EventOf translates a received message into the core's Event, carrying the
// envelope's sender and assignment for the guards. A body that did not parse
// (Envelope.Body nil) is EventUnparseable with the raw text: the core probes
// the worker, then pauses. It reports false for messages that are not a
// worker's part of the story flow (a coordinator command, a task-graph
// callback).
func EventOf(env message.Envelope) (Event, bool) {
	ev := Event{Worker: env.Sender, Assignment: env.Assignment}
	switch m := env.Body.(type) {
	case nil:
		ev.Kind, ev.Detail = EventUnparseable, env.Raw
		return ev, true
	case message.Stage0Complete:
		ev.Kind, ev.Stage, ev.Outcome = EventReport, 0, Complete
		ev.Tasks, ev.Score = m.Tasks, strconv.Itoa(m.PlanScore)
	case message.Stage0Error:
		ev.Kind, ev.Stage, ev.Outcome, ev.Detail = EventReport, 0, Error, m.Details
	case message.Stage1Complete:
		ev.Kind, ev.Stage, ev.Outcome = EventReport, 1, Go
		if m.Verdict == message.VerdictNoGo {
			ev.Outcome = NoGo
		}
		ev.Score, ev.Detail = strconv.Itoa(m.Readiness), m.Reason
	case message.Stage1Error:
		ev.Kind, ev.Stage, ev.Outcome, ev.Detail = EventReport, 1, Error, m.Details
	case message.Stage2Complete:
		ev.Kind, ev.Stage, ev.Outcome = EventReport, 2, Complete
	case message.Stage2Error:
		ev.Kind, ev.Stage, ev.Outcome, ev.Detail = EventReport, 2, Error, m.Details
	case message.Stage3Complete:
		ev.Kind, ev.Stage, ev.Outcome = EventReport, 3, Outcome(m.Verdict)
		ev.Score, ev.Detail = strconv.Itoa(m.Score), m.Issues
	case message.Stage3Error:
		ev.Kind, ev.Stage, ev.Outcome, ev.Detail = EventReport, 3, Error, m.Details
	case message.StatusReply:
		ev.Kind, ev.Stage = EventStatusReply, m.Stage
	default:
		return Event{}, false
	}
	return ev, true
}
