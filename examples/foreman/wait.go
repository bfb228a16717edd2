package main

import (
	"context"
	"os"
	"time"

	"golang.org/x/sys/unix"

	"github.com/agentforeman/foreman/pipeline/team"
)

// decisionPoll is how often a waiting run looks in the team's store for a
// decision another process recorded (foreman -resolve); a decision taken
// on this process's page wakes it at once.
const decisionPoll = 2 * time.Second

// awaitDecision waits until a person decides about a paused story, on the
// page (this process's Resolve, seen as an event after after: the last
// event before the run said it waits, so that a decision taken at once is
// not missed) or in another process (seen in the store's status: a paused
// story with a decision, or fewer paused stories than the paused the run
// ended with); false when ctx ends first.
func awaitDecision(ctx context.Context, tm *team.Team, after uint64, paused int) bool {
	subCtx, cancel := context.WithCancel(ctx)
	defer cancel()
	events := tm.Subscribe(subCtx, after)
	tick := time.NewTicker(decisionPoll)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case e, ok := <-events:
			if !ok {
				return false
			}
			if e.Kind == team.EventStoryResolved {
				return true
			}
		case <-tick.C:
			st, err := tm.Status(ctx)
			if err != nil {
				continue
			}
			waiting := 0
			for _, s := range st.Stories {
				if s.State == team.StoryPaused {
					if s.Decision != "" {
						return true
					}
					waiting++
				}
			}
			if waiting < paused {
				return true
			}
		}
	}
}

// stdinIsTerminal reports whether a person may be at this process's
// terminal.
func stdinIsTerminal() bool {
	_, err := unix.IoctlGetTermios(int(os.Stdin.Fd()), unix.TCGETS)
	return err == nil
}
