package phases

import (
	"encoding/hex"
	"hash/fnv"
	"strconv"
	"time"
)

// Defaults of Limits.
const (
	DefaultMaxIterations = 3
	DefaultLoopThreshold = 3
)

// Limits bound a run. A zero field means the documented default. A run
// uses its TaskSpec.Limits, falling back field by field to the RunLoop's
// Config.Limits and then to these defaults.
type Limits struct {
	// MaxIterations is the number of build → verify iterations a run may
	// take; default DefaultMaxIterations (3): the agent's first attempt and
	// two more with the failed gates' feedback. That is usually enough for
	// an agent to fix what the gates report, and it stops a task the agent
	// cannot do before it spends much.
	MaxIterations int `json:"max_iterations,omitempty"`
	// MaxWallClock bounds the whole run, measured on the RunLoop's clock
	// (Services.Clock) from the run's start. When it expires the run's
	// context ends with cause ErrWallClockExceeded (context.Cause): the
	// agent, gate or snapshot in progress is stopped, and the run ends
	// FAILED with reason wall_clock. With the real clock (Services.Clock nil
	// or the wall clock) this is a context deadline: services see it in
	// ctx.Deadline(). With any other clock, such as a fake one in tests, the
	// run adds no deadline to the context; a timer on that clock cancels it
	// with the same cause. Either way the agent is given the time that remains
	// as AgentRequest.Timeout, and handlers see the deadline in
	// RunView.Deadline.
	// Zero means no limit beyond the caller's context.
	MaxWallClock time.Duration `json:"max_wall_clock,omitempty"`
	// MaxTokens bounds the agent's input plus output tokens over the run.
	// Cache reads and writes are not counted: they are priced differently;
	// bound spending with MaxCostUSD. Zero means no limit.
	MaxTokens int64 `json:"max_tokens,omitempty"`
	// MaxCostUSD bounds the agent's reported cost over the run. Zero means
	// no limit.
	MaxCostUSD float64 `json:"max_cost_usd,omitempty"`
	// LoopThreshold ends a run when this many iterations running produce
	// the same diff or the same failing gate output (reason loop_detected),
	// or no change at all (reason no_changes). Default DefaultLoopThreshold
	// (3); negative disables it. With both defaults it can only fire on the
	// third and last iteration, where it names the cause (a loop, or no
	// changes) instead of max_iterations; it saves iterations once
	// MaxIterations is raised above it.
	LoopThreshold int `json:"loop_threshold,omitempty"`
}

// orElse fills l's zero fields from fallback.
func (l Limits) orElse(fallback Limits) Limits {
	if l.MaxIterations == 0 {
		l.MaxIterations = fallback.MaxIterations
	}
	if l.MaxWallClock == 0 {
		l.MaxWallClock = fallback.MaxWallClock
	}
	if l.MaxTokens == 0 {
		l.MaxTokens = fallback.MaxTokens
	}
	if l.MaxCostUSD == 0 {
		l.MaxCostUSD = fallback.MaxCostUSD
	}
	if l.LoopThreshold == 0 {
		l.LoopThreshold = fallback.LoopThreshold
	}
	return l
}

// resolved applies the built-in defaults.
func (l Limits) resolved() Limits {
	return l.orElse(Limits{MaxIterations: DefaultMaxIterations, LoopThreshold: DefaultLoopThreshold})
}

// budgetSpent reports whether tokens or cost reached their limit: with the
// budget used up, another iteration could only exceed it.
func (l Limits) budgetSpent(tokens TokenUsage, cost float64) bool {
	return (l.MaxTokens > 0 && tokens.Input+tokens.Output >= l.MaxTokens) ||
		(l.MaxCostUSD > 0 && cost >= l.MaxCostUSD)
}

// repeatCounter counts how many iterations running produced the same key;
// an empty key (nothing to compare) resets it.
type repeatCounter struct {
	last  string
	count int
}

func (c *repeatCounter) observe(key string) int {
	switch {
	case key == "":
		c.count = 0
	case key == c.last:
		c.count++
	default:
		c.count = 1
	}
	c.last = key
	return c.count
}

// emptyDiffKey stands for "no change" in loop detection, whatever hash a
// snapshotter gives an empty diff.
const emptyDiffKey = "empty"

// diffKey identifies the change an iteration left, or "" when unknown.
func diffKey(r IterationResult) string {
	s := r.Phases.Snapshot
	if s == nil || s.Snapshot == nil {
		return ""
	}
	if s.Snapshot.Empty() {
		return emptyDiffKey
	}
	return s.Snapshot.DiffHash
}

// failureKey fingerprints an iteration's failing checks (level, name, exit
// code, output), or "" when verification did not fail.
func failureKey(r IterationResult) string {
	v := r.Phases.Verify
	if v == nil || v.Report == nil || v.Report.Passed {
		return ""
	}
	h := fnv.New64a()
	for _, c := range v.Report.FailedChecks() {
		for _, part := range []string{string(c.Level), c.Name, strconv.Itoa(c.ExitCode), strconv.FormatBool(c.TimedOut), c.Output} {
			_, _ = h.Write([]byte(part))
			_, _ = h.Write([]byte{0})
		}
	}
	return hex.EncodeToString(h.Sum(nil))
}
