package team

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// Story is one unit of work for the team: what to build (Title and Body,
// given to every stage's agent) and the stories that must land first.
type Story struct {
	// ID names the story everywhere: its branch, worktree, commit trailer
	// and records. It must be a valid foreman.ItemID of at most
	// taskgraph.MaxSubjectLen (48) characters.
	ID foreman.ItemID `json:"id"`
	// Title is one line; it becomes the squash commit's subject.
	Title string `json:"title"`
	// Body says what the story asks for, in the words an agent reads.
	Body string `json:"body,omitempty"`
	// After lists the stories that must be merged before this one starts.
	After []foreman.ItemID `json:"after,omitempty"`
}

// ErrInvalidStory is matched by *StoryError.
var ErrInvalidStory = errors.New("team: invalid story")

// ErrStoryExists is returned (wrapped in a *StoryError) when a story is
// added again with different content: a story's definition cannot change
// once it is part of the plan. Adding the same story again is a no-op.
var ErrStoryExists = errors.New("team: story already exists with different content")

// ErrUnknownStory is returned for a story id that is not in the plan.
var ErrUnknownStory = errors.New("team: unknown story")

// StoryError says what is wrong with one story. Nothing of the call that
// returned it was written.
type StoryError struct {
	ID     foreman.ItemID
	Reason string
	Err    error // ErrInvalidStory (joined with the cause, e.g. foreman.ErrInvalidID) or ErrStoryExists
}

func (e *StoryError) Error() string {
	return fmt.Sprintf("team: story %q: %s", e.ID, e.Reason)
}

// Unwrap returns ErrInvalidStory or ErrStoryExists.
func (e *StoryError) Unwrap() error { return e.Err }

// validate checks the story on its own (not its dependencies).
func (s Story) validate() error {
	bad := func(format string, args ...any) error {
		return &StoryError{ID: s.ID, Reason: fmt.Sprintf(format, args...), Err: ErrInvalidStory}
	}
	if err := s.ID.Validate(); err != nil {
		return &StoryError{ID: s.ID, Reason: err.Error(), Err: errors.Join(ErrInvalidStory, err)}
	}
	if len(s.ID) > taskgraph.MaxSubjectLen {
		return bad("id is %d characters; at most %d", len(s.ID), taskgraph.MaxSubjectLen)
	}
	if strings.TrimSpace(s.Title) == "" {
		return bad("title is empty")
	}
	if strings.ContainsAny(s.Title, "\r\n") {
		return bad("title has a line break; it becomes a commit subject")
	}
	seen := map[foreman.ItemID]bool{}
	for _, a := range s.After {
		switch {
		case a == s.ID:
			return bad("it cannot come after itself")
		case seen[a]:
			return bad("%s is listed twice in After", a)
		}
		if err := a.Validate(); err != nil {
			return bad("After: %v", err)
		}
		seen[a] = true
	}
	return nil
}

// same reports whether two definitions of a story are the same (the order
// of After does not matter).
func (s Story) same(o Story) bool {
	if s.ID != o.ID || s.Title != o.Title || s.Body != o.Body || len(s.After) != len(o.After) {
		return false
	}
	a, b := slices.Clone(s.After), slices.Clone(o.After)
	slices.Sort(a)
	slices.Sort(b)
	return slices.Equal(a, b)
}

// storyRecord is a story as the store keeps it.
type storyRecord struct {
	Story
	Added time.Time `json:"added"`
}
