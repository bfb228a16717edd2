package teamsim

import (
	"errors"
	"fmt"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// Result is how one simulation went.
type Result struct {
	Seed uint64
	// Steps is how many events ran; Crashes how often the coordinator
	// crashed and recovered.
	Steps, Crashes int
	// End says why the simulation stopped: "finished" (the team's Run
	// would return: everything merged or waiting for a person), "step
	// limit", "time limit", "budget spent" (the worker pool spent
	// Config.TotalBudget and halted: the stories still running wait for a
	// person to raise it), "quiet" (nothing else left to happen), or
	// "cancelled".
	End string
	// Stories is each story's end, in plan order.
	Stories []StoryResult
	// TraceHash identifies the run's trace: the same Config and Seed give
	// the same hash. Trace is the trace itself when Config.Trace is set.
	TraceHash uint64
	Trace     []string
	// Violations are the broken invariants (the first of each).
	Violations []Violation
}

// StoryResult is one story's end.
type StoryResult struct {
	ID      foreman.ItemID
	After   []foreman.ItemID
	Status  pipeline.Status
	Stage   int
	Commits int
	// Pause is the escalation of a paused story.
	Pause *pipeline.Escalation
}

// ErrViolation is matched by the error Result.Err returns.
var ErrViolation = errors.New("teamsim: invariant violated")

// Err is nil when every invariant held, else an error naming the broken
// invariants and the command that replays that seed.
func (r Result) Err() error {
	if len(r.Violations) == 0 {
		return nil
	}
	var b strings.Builder
	for _, v := range r.Violations {
		b.WriteString("\n  " + v.String())
	}
	return fmt.Errorf("%w: seed %d:%s\n  replay: Run with the same Config, Seed %d and Trace set (with the default Config: %s)",
		ErrViolation, r.Seed, b.String(), r.Seed, ReplayCommand(r.Seed))
}

// ReplayCommand is the one line that replays seed with its trace under the
// default Config, as the package's own seed test (TestSeeds) runs it. A
// simulation with a Config of its own (an Agent model, Faults, Stories...)
// replays by calling Run with that Config and the same Seed.
func ReplayCommand(seed uint64) string {
	return fmt.Sprintf("go test ./pipeline/team/teamsim -run 'TestSeeds$' -seed=%d -v", seed)
}

// Count tallies the stories by status.
func (r Result) Count(s pipeline.Status) int {
	n := 0
	for _, st := range r.Stories {
		if st.Status == s {
			n++
		}
	}
	return n
}

func (w *world) result() Result {
	r := Result{Seed: w.cfg.Seed, Steps: w.steps, Crashes: w.crashes, End: w.end, TraceHash: w.hash.Sum64(),
		Trace: w.trace, Violations: w.violations}
	states := w.states()
	for _, id := range w.order {
		st := states[id]
		r.Stories = append(r.Stories, StoryResult{ID: id, After: w.stories[id].after, Status: st.Status, Stage: st.Stage,
			Commits: len(w.repo.merged(id)), Pause: st.Pause})
	}
	return r
}
