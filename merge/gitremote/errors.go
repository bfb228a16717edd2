package gitremote

import (
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
)

// Sentinel errors, matched with errors.Is.
var (
	// ErrInvalidConfig: a required Config field is missing.
	ErrInvalidConfig = errors.New("gitremote: invalid config")
	// ErrWrongRemote: an existing clone at Config.Dir fetches from another
	// repository than Config.Remote.
	ErrWrongRemote = errors.New("gitremote: clone has another remote")
	// ErrRemote: the shared repository could not be read or written
	// (network, permissions, a missing branch). The cause is wrapped.
	ErrRemote = errors.New("gitremote: shared repository unavailable")
	// ErrLostRace is matched by *RaceError.
	ErrLostRace = errors.New("gitremote: lost the race for the target")
	// ErrBranchMoved is matched by *BranchMovedError.
	ErrBranchMoved = errors.New("gitremote: item branch moved on the remote")
	// ErrFenced is matched by *FencedError: a leader with a newer term has
	// fenced the shared repository (Clone.Fence).
	ErrFenced = errors.New("gitremote: fenced off by a newer leader")
	// ErrNotCheckedOut: Push of an item this Clone did not Checkout (so it
	// does not know which remote tip its work started from).
	ErrNotCheckedOut = errors.New("gitremote: item not checked out here")
)

// RaceError is a Merge that found the remote's target moved by another
// merger every time it tried to push (Attempts times). Nothing of this
// merge is on the remote; trying again later is safe.
type RaceError struct {
	Item     foreman.ItemID
	Target   string
	Attempts int
}

func (e *RaceError) Error() string {
	return fmt.Sprintf("gitremote: %s: the remote's %s moved under every one of %d attempts to land it", e.Item, e.Target, e.Attempts)
}

// Is makes a RaceError match ErrLostRace.
func (e *RaceError) Is(target error) bool { return target == ErrLostRace }

// BranchMovedError is a Push refused because someone else pushed the item's
// branch since this worktree started from it (Want): typically a newer
// attempt at the item on another host. This host's work is not on the
// remote and should be dropped.
type BranchMovedError struct {
	Item   foreman.ItemID
	Branch string
	Want   string // the tip this worktree started from ("" = no branch)
	Got    string // the tip on the remote now
}

func (e *BranchMovedError) Error() string {
	want := e.Want
	if want == "" {
		want = "(none)"
	}
	return fmt.Sprintf("gitremote: %s: remote branch %s is at %s, not at %s where this work started; another attempt pushed it", e.Item, e.Branch, e.Got, want)
}

// Is makes a BranchMovedError match ErrBranchMoved.
func (e *BranchMovedError) Is(target error) bool { return target == ErrBranchMoved }
