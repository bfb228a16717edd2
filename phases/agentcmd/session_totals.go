package agentcmd

import (
	"sync"

	"github.com/agentforeman/foreman/phases"
)

// maxRememberedSessions bounds the running totals a Driver keeps; past it
// the session remembered first is forgotten, and a later resumption of it is
// charged its whole running total.
const maxRememberedSessions = 1024

// sessionTotals remembers the running token total that an agent reporting
// cumulative usage (Summary.CumulativeTokens) last reported for each
// session, so that a run resuming the session is charged only what it used
// itself.
type sessionTotals struct {
	mu     sync.Mutex
	totals map[string]sessionSpend
	order  []string // sessions in the order first remembered
}

// sessionSpend is a session's running total: tokens and cost.
type sessionSpend struct {
	tokens phases.TokenUsage
	cost   float64
}

func newSessionTotals() *sessionTotals {
	return &sessionTotals{totals: map[string]sessionSpend{}}
}

// charge returns what a run used, given the running total it reported for
// session after resuming resumed (empty for a new session): the total less
// the one last remembered for resumed. A total smaller in any count than the
// remembered one cannot have grown from it (an agent version that restarts
// its count on resume, say), so it is taken whole. The total is remembered
// for session.
func (s *sessionTotals) charge(resumed, session string, total sessionSpend) (phases.TokenUsage, float64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	used, cost := total.tokens, total.cost
	if base, ok := s.totals[resumed]; ok && resumed != "" && covers(total.tokens, base.tokens) && total.cost >= base.cost {
		used = phases.TokenUsage{
			Input:      total.tokens.Input - base.tokens.Input,
			Output:     total.tokens.Output - base.tokens.Output,
			CacheRead:  total.tokens.CacheRead - base.tokens.CacheRead,
			CacheWrite: total.tokens.CacheWrite - base.tokens.CacheWrite,
		}
		cost = total.cost - base.cost
	}
	if session != "" {
		if _, known := s.totals[session]; !known {
			s.order = append(s.order, session)
			if len(s.order) > maxRememberedSessions {
				delete(s.totals, s.order[0])
				s.order = s.order[1:]
			}
		}
		s.totals[session] = total
	}
	return used, cost
}

// covers reports whether every count of t is at least that of base.
func covers(t, base phases.TokenUsage) bool {
	return t.Input >= base.Input && t.Output >= base.Output &&
		t.CacheRead >= base.CacheRead && t.CacheWrite >= base.CacheWrite
}
