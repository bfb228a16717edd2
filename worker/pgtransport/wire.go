package pgtransport

import (
	"encoding/json"
	"time"

	"github.com/agentforeman/foreman/worker"
)

// jsonMessage is a worker.Message as the transport writes it: the same
// JSON object (the same names, so a host or coordinator of an earlier
// build reads it, and this build reads theirs), with the fields that are
// zero left out. Most messages are a DONE, FAILED or heartbeat-like few
// fields; writing every field made each one about 250 bytes with two
// timestamps to format and parse on each side and in the database's
// jsonb. The shadowing fields below take the embedded Message's place in
// the JSON; any field Message gains is written by the embedded struct.
type jsonMessage struct {
	worker.Message
	Status     string       `json:",omitempty"`
	LastOutput time.Time    `json:",omitzero"`
	Commit     string       `json:",omitempty"`
	QGPassed   bool         `json:",omitempty"`
	QGOutput   string       `json:",omitempty"`
	Reason     string       `json:",omitempty"`
	ResetsAt   time.Time    `json:",omitzero"`
	Question   string       `json:",omitempty"`
	Usage      worker.Usage `json:",omitzero"`
}

// encodeMessage is m's JSON as the transport writes it.
func encodeMessage(m worker.Message) []byte {
	b, _ := json.Marshal(jsonMessage{Message: m, Status: m.Status, LastOutput: m.LastOutput, Commit: m.Commit,
		QGPassed: m.QGPassed, QGOutput: m.QGOutput, Reason: m.Reason, ResetsAt: m.ResetsAt, Question: m.Question,
		Usage: m.Usage}) // plain data: cannot fail
	return b
}

// decodeMessage reads a message written by encodeMessage, or in full by
// an earlier build.
func decodeMessage(b []byte) (worker.Message, error) {
	var w jsonMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return worker.Message{}, err
	}
	m := w.Message
	m.Status, m.LastOutput, m.Commit, m.QGPassed, m.QGOutput = w.Status, w.LastOutput, w.Commit, w.QGPassed, w.QGOutput
	m.Reason, m.ResetsAt, m.Question, m.Usage = w.Reason, w.ResetsAt, w.Question, w.Usage
	return m, nil
}

// jsonAssignment is a worker.Assignment as the coordinator writes it,
// with its empty fields left out (see jsonMessage).
type jsonAssignment struct {
	worker.Assignment
	Stage         int    `json:",omitempty"`
	MemoryContext string `json:",omitempty"`
	Feedback      string `json:",omitempty"`
	RequireReview bool   `json:",omitempty"`
}

func encodeAssignment(a *worker.Assignment) []byte {
	b, _ := json.Marshal(jsonAssignment{Assignment: *a, Stage: a.Stage, MemoryContext: a.MemoryContext,
		Feedback: a.Feedback, RequireReview: a.RequireReview}) // plain data: cannot fail
	return b
}

func decodeAssignment(b []byte) (worker.Assignment, error) {
	var w jsonAssignment
	if err := json.Unmarshal(b, &w); err != nil {
		return worker.Assignment{}, err
	}
	a := w.Assignment
	a.Stage, a.MemoryContext, a.Feedback, a.RequireReview = w.Stage, w.MemoryContext, w.Feedback, w.RequireReview
	return a, nil
}
