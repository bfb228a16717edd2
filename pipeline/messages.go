package pipeline

import (
	"strconv"

	"github.com/agentforeman/foreman/pipeline/message"
)

// EventOf translates a received message into the core's Event, carrying the
// envelope's sender and assignment for the guards. Every stage report, a
// typed message.Report or a story-flow line (message.ReportOf reads both
// one way), is an EventReport with the report's stage, outcome, score,
// task count and details. A body that did not parse (Envelope.Body nil) is
// EventUnparseable with the raw text: the core probes the worker, then
// pauses. It reports false for messages that are not a worker's part of
// the flow (a coordinator command, a task-graph callback).
func EventOf(env message.Envelope) (Event, bool) {
	ev := Event{Worker: env.Sender, Assignment: env.Assignment}
	if env.Body == nil {
		ev.Kind, ev.Detail = EventUnparseable, env.Raw
		return ev, true
	}
	if r, ok := message.ReportOf(env.Body); ok {
		ev.Kind, ev.Stage, ev.Outcome = EventReport, r.Stage, Outcome(r.Outcome)
		ev.Tasks, ev.Detail = r.Tasks, r.Detail
		if r.HasScore {
			ev.Score = strconv.Itoa(r.Score)
		}
		return ev, true
	}
	if m, ok := env.Body.(message.StatusReply); ok {
		ev.Kind, ev.Stage = EventStatusReply, m.Stage
		return ev, true
	}
	return Event{}, false
}
