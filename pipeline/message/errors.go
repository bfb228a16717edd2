package message

import (
	"errors"
	"fmt"
)

// ErrUnparseable is matched (with errors.Is) by every *ParseError.
var ErrUnparseable = errors.New("message: unparseable")

// ParseError is a line that is not a canonical message. The message
// protocol's answer to one is to log it, probe the sender with a StatusCheck,
// and pause the item if the answer does not parse either
// (message_protocol.md, Unparseable Message Handling); that decision is the
// coordinator's.
type ParseError struct {
	Line   string // the text given to Parse, untrimmed
	Reason string // what did not match
	Err    error  // the underlying cause, if any (an invalid id, health's reply error)
}

func (e *ParseError) Error() string {
	return fmt.Sprintf("message: unparseable (%s): %q", e.Reason, e.Line)
}

// Is matches ErrUnparseable.
func (e *ParseError) Is(target error) bool { return target == ErrUnparseable }

// Unwrap returns the underlying cause, so that errors.Is(err,
// foreman.ErrInvalidID) reports an invalid id.
func (e *ParseError) Unwrap() error { return e.Err }
