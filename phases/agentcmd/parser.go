package agentcmd

import (
	"encoding/json"
	"strings"
	"unicode/utf8"

	"github.com/agentforeman/foreman/phases"
)

// OutputParser interprets one execution's stdout, a line at a time. The
// driver creates one per execution and calls it from one goroutine.
type OutputParser interface {
	// ParseLine classifies one line (without its newline) and records what
	// it carries. It never fails and never panics: a line it cannot parse is
	// reported as phases.StreamText with the line itself as text.
	ParseLine(line string) (kind phases.StreamKind, text string)
	// Summary returns what the lines parsed so far reported.
	Summary() Summary
}

// Summary is what an agent's output reported about its run.
type Summary struct {
	SessionID string
	// Result is the agent's final message.
	Result string
	Model  string
	// Tokens counts tokens; Input excludes cached input, which is counted in
	// CacheRead (and CacheWrite where the agent reports cache creation).
	Tokens phases.TokenUsage
	// CumulativeTokens says that Tokens is the running total of the
	// agent's session, carried over from the earlier runs it resumed, not
	// this run's own use (Codex reports usage this way). The Driver then
	// reports the difference from the total it last saw for the session.
	CumulativeTokens bool
	CostUSD          float64
	// CumulativeCost says the same of CostUSD (Claude Code's
	// total_cost_usd after a resume).
	CumulativeCost bool
	NumTurns       int
	// AgentError is the failure the agent reported itself, even if it then
	// exited zero; empty when it reported none.
	AgentError string

	// RateLimit, APIError, PermissionDenials and Questions say why the
	// agent could not go on by itself, as its output told it (see the
	// phases types). A rate limit's ResetsAt is zero when the output named
	// the reset only in words; the Driver reads those.
	RateLimit         *phases.AgentRateLimit
	APIError          *phases.AgentAPIError
	PermissionDenials []phases.AgentPermissionDenial
	Questions         []phases.AgentQuestion
}

// NewTextParser returns the plain-text parser: every line is text and the
// summary is always empty.
func NewTextParser() OutputParser { return textParser{} }

type textParser struct{}

func (textParser) ParseLine(line string) (phases.StreamKind, string) { return phases.StreamText, line }
func (textParser) Summary() Summary                                  { return Summary{} }

// decodeObject decodes line as a JSON object. It reports false for anything
// else (blank lines, plain text, arrays, malformed JSON).
func decodeObject(line string, v any) bool {
	trimmed := strings.TrimSpace(line)
	if !strings.HasPrefix(trimmed, "{") {
		return false
	}
	return json.Unmarshal([]byte(trimmed), v) == nil
}

// maxEventText bounds the human-readable text of one event taken from a
// tool input or output, which can be whole files.
const maxEventText = 2000

// clip shortens s to at most n bytes on a UTF-8 boundary, marking the cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && !utf8.RuneStart(s[cut]) {
		cut--
	}
	return s[:cut] + "…"
}

// rawText renders a JSON value that is a string, or an array of text
// blocks, or anything else as compact JSON.
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var blocks []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &blocks) == nil {
		var parts []string
		for _, b := range blocks {
			if b.Text != "" {
				parts = append(parts, b.Text)
			}
		}
		if len(parts) > 0 {
			return strings.Join(parts, "\n")
		}
	}
	return string(raw)
}
