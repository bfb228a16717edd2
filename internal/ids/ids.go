package ids

import (
	"errors"
	"fmt"
	"strings"
)

// ErrInvalid is matched by every validation failure.
var ErrInvalid = errors.New("invalid id")

// Error says which id was rejected and why.
type Error struct {
	Kind   string // "item", "worker", ...
	ID     string
	Reason string
}

func (e *Error) Error() string {
	return fmt.Sprintf("invalid %s id %q: %s", e.Kind, e.ID, e.Reason)
}

// Is makes errors.Is(err, ErrInvalid) true.
func (e *Error) Is(target error) bool { return target == ErrInvalid }

// Validate checks id against ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$ and rejects
// "..", so that the id is safe as a path element, a git ref component and
// a command-line argument. kind names the id in the error.
func Validate(kind, id string) error {
	switch {
	case id == "":
		return &Error{Kind: kind, ID: id, Reason: "empty"}
	case strings.HasPrefix(id, "-"):
		return &Error{Kind: kind, ID: id, Reason: "starts with '-'"}
	case len(id) > 64:
		return &Error{Kind: kind, ID: id, Reason: "longer than 64 characters"}
	case strings.Contains(id, ".."):
		return &Error{Kind: kind, ID: id, Reason: "contains '..'"}
	case strings.HasSuffix(id, ".lock") || strings.HasSuffix(id, "."):
		// git refuses ref components ending in ".lock" or ".".
		return &Error{Kind: kind, ID: id, Reason: "ends with '.lock' or '.'"}
	case !matchesPattern(id):
		return &Error{Kind: kind, ID: id, Reason: "must match ^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$"}
	}
	return nil
}

// matchesPattern is ^[A-Za-z0-9][A-Za-z0-9._-]*$ without a regexp: ids are
// validated on hot paths (every transition that starts an item), and this is
// several times cheaper. Length is checked by the caller.
func matchesPattern(id string) bool {
	for i := 0; i < len(id); i++ {
		c := id[i]
		alnum := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9'
		if !alnum && (i == 0 || (c != '.' && c != '_' && c != '-')) {
			return false
		}
	}
	return true
}
