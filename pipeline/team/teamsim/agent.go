package teamsim

import (
	"math/rand/v2"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/message"
)

// Execution is one run of a simulated agent: one attempt at one stage of
// one story.
type Execution struct {
	Story foreman.ItemID
	Stage int
	// Attempt counts the worker pool's attempts at this assignment
	// (1-based; a rate-limited one is attempted again).
	Attempt int
	// Feedback is the previous round's NO-GO reason or quality issues.
	Feedback string
	// Resume is set when the agent replaces a crashed one.
	Resume bool
}

// Fault is what goes wrong with an execution (FaultNone: nothing).
type Fault uint8

// The faults an agent model can choose.
const (
	FaultNone      Fault = iota
	FaultHang            // no message at all: the pool probes, then declares it dead
	FaultSilent          // heartbeats but no progress: the pool stops it as stalled
	FaultCrash           // the agent fails (its process exits unsuccessfully)
	FaultRateLimit       // the provider refuses it; the pool retries after a backoff
)

var faultNames = [...]string{"ok", "hang", "silent", "crash", "rate-limit"}

func (f Fault) String() string {
	if int(f) < len(faultNames) {
		return faultNames[f]
	}
	return "fault?"
}

// Behaviour is what a simulated agent does with an execution.
type Behaviour struct {
	Fault Fault
	// Line is the report it ends with (a canonical stage report, or
	// anything: garbage is delivered too, as a real agent's would be).
	Line string
	// Duration is how long it works before it reports or fails.
	Duration time.Duration
	// Tokens is what it spends (reported with its completion).
	Tokens int64
	// ReportTwice: its completion and its report arrive twice.
	// LateReport: its report arrives again long after (when a later
	// worker has replaced it).
	ReportTwice, LateReport bool
}

// AgentModel decides an execution's behaviour from the run's random
// source (the only randomness it may use, so that seeds replay) and the
// faults' probabilities.
type AgentModel func(r *rand.Rand, f *Faults, e Execution) Behaviour

// DefaultAgent is an agent of the story flow that mostly succeeds and
// misbehaves with the probabilities of f.
func DefaultAgent(r *rand.Rand, f *Faults, e Execution) Behaviour {
	b := Behaviour{Duration: time.Duration(1+r.IntN(15)) * time.Minute, Tokens: tokensPerRun}
	switch roll := r.Float64(); {
	case roll < f.Hang:
		b.Fault = FaultHang
	case roll < f.Hang+f.Silent:
		b.Fault = FaultSilent
	case roll < f.Hang+f.Silent+f.Crash:
		b.Fault = FaultCrash
	case roll < f.Hang+f.Silent+f.Crash+f.RateLimit && e.Attempt < 3:
		b.Fault = FaultRateLimit
	}
	if r.Float64() < f.OverBudget {
		b.Tokens *= 10
	}
	b.ReportTwice = r.Float64() < f.ReportTwice
	b.LateReport = r.Float64() < f.LateReport
	item := e.Story
	switch roll := r.Float64(); {
	case roll < f.Garbage:
		b.Line = "I think I am done?? " + string(item)
		return b
	case roll < f.Garbage+f.WrongItem:
		item = "OTHER-1"
	}
	errored := r.Float64() < f.StageError
	var m message.Message
	switch e.Stage {
	case 0:
		m = message.Stage0Complete{Item: item, Tasks: 1 + r.IntN(5), PlanScore: message.MaxPlanScore}
		if errored {
			m = message.Stage0Error{Item: item, Details: "cannot read the story"}
		}
	case 1:
		m = message.Stage1Complete{Item: item, Verdict: message.VerdictGo, Readiness: 8}
		if r.Float64() < f.NoGo {
			m = message.Stage1Complete{Item: item, Verdict: message.VerdictNoGo, Readiness: 3, Reason: "acceptance criteria unclear"}
		}
		if errored {
			m = message.Stage1Error{Item: item, Details: "validator failed"}
		}
	case 2:
		m = message.Stage2Complete{Item: item}
		if errored {
			m = message.Stage2Error{Item: item, Details: "build broken"}
		}
	default:
		m = message.Stage3Complete{Item: item, Verdict: message.VerdictPass, Score: 95}
		if r.Float64() < f.QualityFail {
			m = message.Stage3Complete{Item: item, Verdict: message.VerdictFail, Score: 40, Issues: "tests fail"}
		}
		if errored {
			m = message.Stage3Error{Item: item, Details: "gate crashed"}
		}
	}
	b.Line = message.Format(m)
	return b
}
