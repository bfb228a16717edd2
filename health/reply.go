package health

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman"
)

// ProbeText is the status check sent to a quiet worker. Its wording asks
// for the one-line reply ParseStatusReply reads.
func ProbeText(item foreman.ItemID, stage int) string {
	return fmt.Sprintf("Status check: are you still working on Stage %d for %s?", stage, item)
}

// WorkerStatus is the state a worker claims in its status reply.
type WorkerStatus string

// The statuses a worker may claim in its status reply.
const (
	StatusExecuting WorkerStatus = "EXECUTING"
	StatusWaiting   WorkerStatus = "WAITING"
	StatusError     WorkerStatus = "ERROR"
)

// StatusReply is a parsed answer to a probe:
//
//	Status for {item}: Stage {N} {EXECUTING|WAITING|ERROR}. Current step: {description}.
type StatusReply struct {
	Item   foreman.ItemID
	Stage  int
	Status WorkerStatus
	Step   string
}

// ErrUnparseableReply is matched by every *ReplyError.
var ErrUnparseableReply = errors.New("health: unparseable status reply")

// ReplyError is a status reply that does not follow the format, or that
// answers for another item or stage. It clears nothing.
type ReplyError struct {
	Text   string
	Reason string
	// Err is the underlying cause when there is one, such as an id that
	// fails validation (matching foreman.ErrInvalidID); nil otherwise.
	Err error
}

func (e *ReplyError) Error() string {
	return fmt.Sprintf("health: unparseable status reply (%s): %q", e.Reason, e.Text)
}

// Is matches ErrUnparseableReply.
func (e *ReplyError) Is(target error) bool { return target == ErrUnparseableReply }

// Unwrap returns Err, so errors.Is also sees the cause.
func (e *ReplyError) Unwrap() error { return e.Err }

var statusReplyRE = regexp.MustCompile(`^Status for (\S+): Stage (\d+) (EXECUTING|WAITING|ERROR)\.\s*Current step:\s*(.*?)\.?$`)

// ParseStatusReply parses a status reply. Surrounding whitespace is ignored;
// the first line that parses wins, since agents like to add chatter.
func ParseStatusReply(text string) (StatusReply, error) {
	for _, line := range strings.Split(text, "\n") {
		m := statusReplyRE.FindStringSubmatch(strings.TrimSpace(line))
		if m == nil {
			continue
		}
		item := foreman.ItemID(strings.TrimSuffix(m[1], ":"))
		if err := item.Validate(); err != nil {
			return StatusReply{}, &ReplyError{Text: text, Reason: err.Error(), Err: err}
		}
		stage, err := strconv.Atoi(m[2])
		if err != nil {
			return StatusReply{}, &ReplyError{Text: text, Reason: "stage out of range"}
		}
		return StatusReply{Item: item, Stage: stage, Status: WorkerStatus(m[3]), Step: m[4]}, nil
	}
	return StatusReply{}, &ReplyError{Text: text, Reason: "no line matches \"Status for {id}: Stage {N} {EXECUTING|WAITING|ERROR}. Current step: {description}.\""}
}
