package agentmcp

import "fmt"

// Fence is where a request stands against the assignment its bearer token
// was issued for (Server.Begin) and the assignments the server was told
// about.
type Fence uint8

const (
	// FenceForeign: the request names an assignment other than the one
	// its bearer token was issued for. Whoever sent it holds one
	// assignment's token and acts for another: refused with a tool error,
	// counted (Stats.Forged, Config.OnRefused), never applied. The zero
	// Fence, so that a fence never established refuses.
	FenceForeign Fence = iota
	// FenceStale: the token's own assignment, which is no longer its
	// item's current one (a newer worker replaced it).
	FenceStale
	// FenceCurrent: the token's own assignment, its item's current one.
	FenceCurrent
)

func (f Fence) String() string {
	switch f {
	case FenceForeign:
		return "foreign"
	case FenceStale:
		return "stale"
	case FenceCurrent:
		return "current"
	}
	return fmt.Sprintf("Fence(%d)", uint8(f))
}

// Check is the host's judgement of a report from a current assignment
// (Config.Check): is it well formed for its stage, and does the evidence
// back what it claims?
type Check struct {
	// Problem says what is wrong with the report for its stage (an outcome
	// the stage does not have, a score out of range); "" when nothing is.
	Problem string
	// ClaimsCompletion: the outcome says the work is done.
	ClaimsCompletion bool
	// NeedsChange: the stage's work must change the workspace (a build),
	// so a completion is believed only with a change since the
	// assignment's base.
	NeedsChange bool
	// Changed: the workspace holds commits or changes since that base.
	Changed bool
	// Evidence says what the host found, for the agent to read.
	Evidence string
}

// Verdict is what the server does with a report.
type Verdict uint8

const (
	// Accepted: kept as the assignment's report, for the host to take
	// when the agent's stage ends (Server.End).
	Accepted Verdict = iota + 1
	// Stale: counted (Stats.Stale, Config.OnStale) and ignored, as a
	// message from a replaced worker is; the agent is told to stop.
	Stale
	// Forged: the report names an assignment its bearer token was not
	// issued for; a tool error, counted (Stats.Forged, Config.OnRefused).
	Forged
	// Invalid: the current assignment's report is malformed for its stage;
	// a tool error saying why, so that the agent can send a correct one.
	Invalid
	// Unproven: the report claims completion of work that must change the
	// workspace, and there is no change since the assignment's base; a
	// tool error, and nothing is kept.
	Unproven
)

func (v Verdict) String() string {
	switch v {
	case Accepted:
		return "accepted"
	case Stale:
		return "stale"
	case Forged:
		return "forged"
	case Invalid:
		return "invalid"
	case Unproven:
		return "unproven"
	}
	return fmt.Sprintf("Verdict(%d)", uint8(v))
}

// IsToolError reports whether the agent gets the verdict as a tool error
// (the MCP result's isError): the report was not taken and the agent can
// do something about it.
func (v Verdict) IsToolError() bool { return v == Forged || v == Invalid || v == Unproven }

// Decide is the server's whole decision about one report, as a pure
// function: the fence first (a report for another assignment than the
// token's is forged, one from a replaced assignment is stale, whatever
// the report says), then the host's check of a current assignment's
// report (malformed, then a completion without the change it needs), else
// accepted. c is ignored unless f is FenceCurrent.
func Decide(f Fence, c Check) Verdict {
	switch f {
	case FenceForeign:
		return Forged
	case FenceStale:
		return Stale
	case FenceCurrent:
	default:
		return Forged
	}
	switch {
	case c.Problem != "":
		return Invalid
	case c.ClaimsCompletion && c.NeedsChange && !c.Changed:
		return Unproven
	}
	return Accepted
}
