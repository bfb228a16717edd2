package pgtransport

import (
	"encoding/json"
	"math"
	"strconv"
	"time"

	"github.com/agentforeman/foreman"
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

// encodeMessage is m's JSON as the transport writes it: what
// encoding/json writes of jsonMessage, written by hand (flatjson.go).
func encodeMessage(m worker.Message) []byte {
	return appendMessage(make([]byte, 0, 96), m)
}

func appendMessage(dst []byte, m worker.Message) []byte {
	if !m.LastOutput.IsZero() || !m.ResetsAt.IsZero() {
		// Rare (a rate limit's reset; heartbeats go in their own column):
		// encoding/json formats the times.
		return appendMessageJSON(dst, &m)
	}
	start := len(dst)
	dst = append(dst, `{"Kind":`...)
	dst = strconv.AppendUint(dst, uint64(m.Kind), 10)
	dst = appendJSONString(append(dst, `,"Worker":`...), string(m.Worker))
	dst = appendJSONString(append(dst, `,"Assignment":`...), string(m.Assignment))
	for _, f := range [...]struct{ name, v string }{{"Status", m.Status}, {"Commit", m.Commit}} {
		if f.v != "" {
			dst = appendJSONString(appendField(dst, f.name), f.v)
		}
	}
	if m.QGPassed {
		dst = append(appendField(dst, "QGPassed"), "true"...)
	}
	for _, f := range [...]struct{ name, v string }{{"QGOutput", m.QGOutput}, {"Reason", m.Reason}, {"Question", m.Question}} {
		if f.v != "" {
			dst = appendJSONString(appendField(dst, f.name), f.v)
		}
	}
	if m.Usage != (worker.Usage{}) {
		dst = strconv.AppendInt(append(appendField(dst, "Usage"), `{"Tokens":`...), m.Usage.Tokens, 10)
		var ok bool
		if dst, ok = appendJSONFloat(append(dst, `,"CostUSD":`...), m.Usage.CostUSD); !ok {
			// NaN or infinite: what encoding/json makes of it (nothing).
			return appendMessageJSON(dst[:start], &m)
		}
		dst = append(dst, '}')
	}
	return append(dst, '}')
}

// appendMessageJSON appends what encoding/json writes of m as a
// jsonMessage (nothing when it refuses m). It is a function of its own,
// never inlined, so that the jsonMessage it builds takes no room in
// appendMessage's stack frame: a frame that large made the goroutines
// that deliver a run's messages grow their stacks by copying.
//
//go:noinline
func appendMessageJSON(dst []byte, m *worker.Message) []byte {
	b, _ := json.Marshal(jsonMessage{Message: *m, Status: m.Status, LastOutput: m.LastOutput, Commit: m.Commit,
		QGPassed: m.QGPassed, QGOutput: m.QGOutput, Reason: m.Reason, ResetsAt: m.ResetsAt, Question: m.Question,
		Usage: m.Usage}) // plain data; NaN or an infinity refused: nothing
	return append(dst, b...)
}

// decodeMessage reads a message written by encodeMessage, or in full by
// an earlier build.
func decodeMessage(b []byte) (worker.Message, error) { return decodeMessageText(string(b)) }

// decodeMessageText is decodeMessage of a body read as a string: the
// message's strings are substrings of b.
func decodeMessageText(b string) (worker.Message, error) {
	var m worker.Message
	if scanFlat(b, func(key string, v flatValue) bool {
		switch {
		case key == "Kind" && v.kind == 'n' && v.num >= 0 && v.num <= math.MaxUint8:
			m.Kind = worker.MessageKind(v.num)
		case key == "QGPassed" && v.kind == 'b':
			m.QGPassed = v.bit
		case v.kind != 's':
			return false
		case key == "Worker":
			m.Worker = foreman.WorkerID(v.str)
		case key == "Assignment":
			m.Assignment = foreman.AssignmentID(v.str)
		case key == "Status":
			m.Status = v.str
		case key == "Commit":
			m.Commit = v.str
		case key == "QGOutput":
			m.QGOutput = v.str
		case key == "Reason":
			m.Reason = v.str
		case key == "Question":
			m.Question = v.str
		default: // times, usage, names in another case: encoding/json
			return false
		}
		return true
	}) {
		return m, nil
	}
	var w jsonMessage
	if err := json.Unmarshal([]byte(b), &w); err != nil {
		return worker.Message{}, err
	}
	m = w.Message
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

// encodeAssignment is what encoding/json writes of jsonAssignment,
// written by hand (flatjson.go).
func encodeAssignment(a *worker.Assignment) []byte {
	return appendAssignment(make([]byte, 0, 128+len(a.Prompt)), a)
}

func appendAssignment(dst []byte, a *worker.Assignment) []byte {
	dst = appendJSONString(append(dst, `{"ID":`...), string(a.ID))
	dst = appendJSONString(append(dst, `,"Worker":`...), string(a.Worker))
	dst = appendJSONString(append(dst, `,"Item":`...), string(a.Item))
	dst = appendJSONString(append(dst, `,"Prompt":`...), a.Prompt)
	dst = appendJSONString(append(dst, `,"Worktree":`...), a.Worktree)
	dst = strconv.AppendInt(append(dst, `,"Attempt":`...), int64(a.Attempt), 10)
	if a.Stage != 0 {
		dst = strconv.AppendInt(append(dst, `,"Stage":`...), int64(a.Stage), 10)
	}
	if a.MemoryContext != "" {
		dst = appendJSONString(append(dst, `,"MemoryContext":`...), a.MemoryContext)
	}
	if a.Feedback != "" {
		dst = appendJSONString(append(dst, `,"Feedback":`...), a.Feedback)
	}
	if a.RequireReview {
		dst = append(dst, `,"RequireReview":true`...)
	}
	return append(dst, '}')
}

func decodeAssignment(b []byte) (worker.Assignment, error) { return decodeAssignmentText(string(b)) }

// decodeAssignmentText is decodeAssignment of a body read as a string: the
// assignment's strings are substrings of b.
func decodeAssignmentText(b string) (worker.Assignment, error) {
	var a worker.Assignment
	if scanFlat(b, func(key string, v flatValue) bool {
		switch {
		case key == "Stage" && v.kind == 'n' && int64(int(v.num)) == v.num:
			a.Stage = int(v.num)
		case key == "Attempt" && v.kind == 'n' && int64(int(v.num)) == v.num:
			a.Attempt = int(v.num)
		case key == "RequireReview" && v.kind == 'b':
			a.RequireReview = v.bit
		case v.kind != 's':
			return false
		case key == "ID":
			a.ID = foreman.AssignmentID(v.str)
		case key == "Worker":
			a.Worker = foreman.WorkerID(v.str)
		case key == "Item":
			a.Item = foreman.ItemID(v.str)
		case key == "Prompt":
			a.Prompt = v.str
		case key == "Worktree":
			a.Worktree = v.str
		case key == "MemoryContext":
			a.MemoryContext = v.str
		case key == "Feedback":
			a.Feedback = v.str
		default:
			return false
		}
		return true
	}) {
		return a, nil
	}
	var w jsonAssignment
	if err := json.Unmarshal([]byte(b), &w); err != nil {
		return worker.Assignment{}, err
	}
	a = w.Assignment
	a.Stage, a.MemoryContext, a.Feedback, a.RequireReview = w.Stage, w.MemoryContext, w.Feedback, w.RequireReview
	return a, nil
}
