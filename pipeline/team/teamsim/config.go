package teamsim

import (
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/worker"
)

// Config is one simulation. Only Seed matters for a reproducible run: the
// same Config with the same Seed gives the same trace, event for event.
// Zero values mean the documented defaults.
type Config struct {
	// Seed decides everything: the plan, each agent's behaviour, message
	// delays, duplicates and reorderings, merge conflicts and coordinator
	// crashes. Default: 0 (a seed like any other).
	Seed uint64
	// Flow is the stages every story goes through. The simulated agents
	// print the story flow's stage 0-3 lines, so a flow has at most 4
	// stages here (the team itself takes any number). Default:
	// pipeline.StoryFlow(pipeline.StoryConfig{}).
	Flow *pipeline.Flow
	// Stories is the most stories in the plan, at most 40; Config.Seed
	// picks 1..Stories, each blocked by up to two earlier ones. Default: 6.
	Stories int
	// Workers is how many stories run at once. Default: 3.
	Workers int
	// Faults are the probabilities of everything that goes wrong.
	// NoFaults() turns them all off. Default: DefaultFaults().
	Faults *Faults
	// Agent decides what a simulated agent does with one execution of a
	// stage: a host plugs in a model of its own agents here. Default:
	// DefaultAgent.
	Agent AgentModel
	// TotalBudget bounds the tokens the agents of one worker pool may
	// spend (the pool escalates and assigns nothing more once it is
	// exceeded; a coordinator restart starts a new pool); negative means
	// unlimited. Default: 20,000 to 120,000, picked by Seed (an execution
	// spends 2,000, an overspending one 20,000).
	TotalBudget int64
	// MaxSteps bounds the events of one simulation. A simulation that
	// reaches it, or MaxTime, stops with its stories still running, which
	// the end-state invariant accepts. Default: 20,000 (DefaultMaxSteps).
	MaxSteps int
	// MaxTime bounds a simulation's simulated time (see MaxSteps).
	// Default: 72 h (DefaultMaxTime).
	MaxTime time.Duration
	// Trace keeps the trace's lines in Result.Trace (its hash is always
	// computed). Default: false.
	Trace bool
}

// Faults are the probabilities (0..1) of what goes wrong. Per agent
// execution: Hang (no message at all), Silent (heartbeats but no
// progress), Crash (the agent fails), Garbage (its report does not parse),
// WrongItem (its report names another story), RateLimit (the provider
// refuses it first), OverBudget (it spends ten times its usual tokens),
// ReportTwice (its completion and report arrive twice), LateReport (its
// report arrives again long after it was replaced). Per stage outcome:
// NoGo, QualityFail (a gate fails; Stage 3 FAILs up to twice), StageError.
// Per message: Duplicate and Delay (a delay of up to MaxDelay; different
// delays reorder). Conflict is the chance that a story changes the one file
// every such story changes: its merge conflicts when another of them landed
// since its branch started, as with git (simRepo).
// CrashPoint is the chance that the coordinator crashes at any store write,
// spawn, message or merge (before or after it happened: a write that
// happened but whose caller never learned of it, or one lost with the
// un-synced tail); Crashes bounds the coordinator crashes of one run.
// Person is the chance that a person decides about a paused story (retry,
// resume, skip or abandon), within seconds or up to an hour after it
// paused, at most twice per story.
type Faults struct {
	Hang, Silent, Crash, Garbage, WrongItem, RateLimit, OverBudget, ReportTwice, LateReport float64
	NoGo, QualityFail, StageError                                                           float64
	Duplicate, Delay                                                                        float64
	MaxDelay                                                                                time.Duration
	Conflict                                                                                float64
	CrashPoint                                                                              float64
	Crashes                                                                                 int
	Person                                                                                  float64
}

// DefaultFaults are the probabilities a simulation uses unless told
// otherwise: every behaviour shows up within a few hundred seeds.
func DefaultFaults() Faults {
	return Faults{
		Hang: 0.02, Silent: 0.02, Crash: 0.03, Garbage: 0.02, WrongItem: 0.01, RateLimit: 0.03,
		OverBudget: 0.01, ReportTwice: 0.05, LateReport: 0.04,
		NoGo: 0.08, QualityFail: 0.15, StageError: 0.01,
		Duplicate: 0.05, Delay: 0.3, MaxDelay: 2 * time.Minute,
		Conflict: 0.25, CrashPoint: 0.004, Crashes: 3, Person: 0.5,
	}
}

// NoFaults is a world where nothing goes wrong: every agent succeeds and
// the coordinator never crashes.
func NoFaults() Faults { return Faults{} }

// Defaults of Config.
const (
	DefaultStories  = 6
	DefaultWorkers  = 3
	DefaultMaxSteps = 20_000
	DefaultMaxTime  = 72 * time.Hour
)

// Timing of the simulated worker pool: fast enough that a seed is a few
// thousand events, in the same proportions as the defaults (heartbeat <
// liveness < progress).
const (
	heartbeatInterval = time.Minute
	livenessTimeout   = 3 * time.Minute
	probeTimeout      = 2 * time.Minute
	progressTimeout   = 40 * time.Minute
	tokensPerRun      = 2_000
)

// ErrConfig is matched by every *ConfigError.
var ErrConfig = errors.New("teamsim: invalid config")

// ConfigError names a Config field that cannot be simulated.
type ConfigError struct {
	Field, Reason string
}

func (e *ConfigError) Error() string { return fmt.Sprintf("teamsim: Config.%s: %s", e.Field, e.Reason) }

// Is matches ErrConfig.
func (e *ConfigError) Is(target error) bool { return target == ErrConfig }

func (c Config) withDefaults() (Config, error) {
	if c.Flow == nil {
		c.Flow = pipeline.StoryFlow(pipeline.StoryConfig{})
	}
	if err := c.Flow.Validate(); err != nil {
		return c, &ConfigError{Field: "Flow", Reason: err.Error()}
	}
	if len(c.Flow.Stages) > 4 {
		return c, &ConfigError{Field: "Flow", Reason: fmt.Sprintf("%d stages; stage reports name stages 0-3", len(c.Flow.Stages))}
	}
	switch {
	case c.Stories < 0 || c.Stories > 40:
		return c, &ConfigError{Field: "Stories", Reason: fmt.Sprintf("%d is not in 0..40", c.Stories)}
	case c.Workers < 0:
		return c, &ConfigError{Field: "Workers", Reason: fmt.Sprintf("%d is negative", c.Workers)}
	}
	if c.Stories == 0 {
		c.Stories = DefaultStories
	}
	if c.Workers == 0 {
		c.Workers = DefaultWorkers
	}
	if c.Faults == nil {
		f := DefaultFaults()
		c.Faults = &f
	}
	if c.Agent == nil {
		c.Agent = DefaultAgent
	}
	if c.MaxSteps <= 0 {
		c.MaxSteps = DefaultMaxSteps
	}
	if c.MaxTime <= 0 {
		c.MaxTime = DefaultMaxTime
	}
	return c, nil
}

// budget is the worker pool's total budget for c.
func (c Config) budget() worker.Budget {
	if c.TotalBudget < 0 {
		return worker.Budget{}
	}
	return worker.Budget{Tokens: c.TotalBudget}
}
