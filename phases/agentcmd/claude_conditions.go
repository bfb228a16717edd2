package agentcmd

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/agentforeman/foreman/phases"
)

// Claude Code reports the conditions that stop it as follows (the message
// types of anthropics/claude-agent-sdk-python, types.py and
// _internal/message_parser.py):
//   - rate_limit_event: rate_limit_info {status allowed | allowed_warning |
//     rejected, resetsAt (Unix seconds), rateLimitType}; rejected means the
//     limit is hit.
//   - an assistant message Claude Code makes up ("<synthetic>" model) with
//     "error": rate_limit, authentication_failed, billing_error,
//     invalid_request, server_error or unknown, its text the message shown
//     to a user ("You've hit your limit · resets 12pm (America/Chicago)").
//   - the result: api_error_status (429, 500, 529, ...) on an is_error
//     result; permission_denials [{tool_name, tool_use_id, tool_input}];
//     deferred_tool_use {id, name, input} when a hook deferred a tool call.
//   - control_request {request: {subtype: can_use_tool, tool_name, input}}:
//     a permission prompt for the host, when one was asked for
//     (--permission-prompt-tool stdio); a driver that does not answer leaves
//     the agent waiting.
// An AskUserQuestion tool call that gets no successful result is a question
// nobody answered: in a non-interactive run Claude Code refuses it
// (is_error tool result, listed in permission_denials).

func (p *claudeParser) rateLimitEvent(l claudeLine) (phases.StreamKind, string) {
	info := l.RateLimitInfo
	if info == nil {
		return phases.StreamSystem, "rate limit"
	}
	switch info.Status {
	case "rejected":
		rl := &phases.AgentRateLimit{Window: info.RateLimitType}
		if info.ResetsAt > 0 {
			rl.ResetsAt = time.Unix(int64(info.ResetsAt), 0)
		}
		if p.cond.rateLimit != nil {
			rl.Message = p.cond.rateLimit.Message
		}
		p.cond.rateLimit = rl
	case "allowed":
		p.cond.rateLimit = nil
	}
	text := "rate limit " + info.Status
	if info.RateLimitType != "" {
		text += " (" + info.RateLimitType + ")"
	}
	if info.ResetsAt > 0 {
		text += fmt.Sprintf(", resets at %s", time.Unix(int64(info.ResetsAt), 0).UTC().Format(time.RFC3339))
	}
	return phases.StreamSystem, text
}

// assistantError records the API error a synthetic assistant message
// reported.
func (p *claudeParser) assistantError(code, text string) {
	if code == "rate_limit" {
		if p.cond.rateLimit == nil {
			p.cond.rateLimit = &phases.AgentRateLimit{}
		}
		p.cond.rateLimit.Message = text
		return
	}
	p.cond.apiError = &phases.AgentAPIError{Code: code, Message: text}
}

func (p *claudeParser) controlRequest(l claudeLine) (phases.StreamKind, string) {
	r := l.Request
	if r == nil || r.Subtype != "can_use_tool" {
		return phases.StreamSystem, "control request"
	}
	q := phases.AgentQuestion{Tool: "can_use_tool", Text: "Allow " + r.ToolName + ": " + toolInputSummary(r.Input) + "?"}
	if r.ToolName == askUserQuestion {
		if text, ok := questionText(r.Input); ok {
			q = phases.AgentQuestion{Tool: askUserQuestion, Text: text}
		}
	}
	p.cond.addQuestion(q)
	return phases.StreamSystem, "waiting for a person: " + q.Text
}

// resultDenials records the result's permission denials and deferred tool
// call. A refused AskUserQuestion is a question, not a denial.
func (p *claudeParser) resultDenials(l claudeLine) {
	for _, d := range l.PermissionDenials {
		if d.ToolName == askUserQuestion {
			if _, tracked := p.cond.asked[d.ToolUseID]; tracked && d.ToolUseID != "" {
				continue // asked in a message; still unanswered
			}
			if text, ok := questionText(d.ToolInput); ok {
				p.cond.addQuestion(phases.AgentQuestion{Tool: askUserQuestion, Text: text})
			} else if len(p.cond.askedOrder) == 0 {
				p.cond.addQuestion(phases.AgentQuestion{Tool: askUserQuestion, Text: "(the question's text was not in the output)"})
			}
			continue
		}
		p.cond.deny(phases.AgentPermissionDenial{Tool: d.ToolName, Input: toolInputSummary(d.ToolInput)})
	}
	if t := l.DeferredToolUse; t != nil && t.Name != "" {
		p.cond.addQuestion(phases.AgentQuestion{Tool: t.Name, Text: "Allow " + t.Name + ": " + toolInputSummary(t.Input) + "?"})
	}
}

// askUserQuestion is Claude Code's tool for asking the user; in a
// non-interactive run it is refused and appears in permission_denials.
const askUserQuestion = "AskUserQuestion"

// resultAPIError records the status of the API call that ended an error
// result: 429 is a rate limit, anything else an API error.
func (p *claudeParser) resultAPIError(l claudeLine) {
	switch {
	case l.APIErrorStatus == 0:
	case l.APIErrorStatus == 429:
		if p.cond.rateLimit == nil {
			p.cond.rateLimit = &phases.AgentRateLimit{Message: l.Result}
		}
	case p.cond.rateLimit == nil:
		if p.cond.apiError == nil {
			p.cond.apiError = &phases.AgentAPIError{Message: l.Result}
		}
		p.cond.apiError.Status = l.APIErrorStatus
	}
}

// apiRetryText describes Claude Code's api_retry line: {"type":"system",
// "subtype":"api_retry","attempt":N,"max_retries":M,"retry_delay_ms":D,
// "error_status":429,"error":"rate_limit"}, printed while it waits to
// retry a failed API call (for minutes, on a rate limit).
func apiRetryText(l claudeLine) string {
	var kind string
	_ = json.Unmarshal(l.Error, &kind)
	text := "model API"
	if l.ErrorStatus != 0 {
		text += fmt.Sprintf(" %d", l.ErrorStatus)
	}
	if kind != "" {
		text += " " + kind
	}
	text += fmt.Sprintf(": retry %d", l.Attempt)
	if l.MaxRetries > 0 {
		text += fmt.Sprintf(" of %d", l.MaxRetries)
	}
	if l.RetryDelayMS > 0 {
		text += " in " + (time.Duration(l.RetryDelayMS) * time.Millisecond).Round(100*time.Millisecond).String()
	}
	return text
}

// fatalAPIStatus reports whether a model API status is one no retry can
// get past: the key is wrong (401) or not allowed (403). The CLIs retry
// them anyway (Claude Code ten times, for minutes).
func fatalAPIStatus(status int) bool { return status == 401 || status == 403 }

// stopper is a parser that can tell, from a line, that the agent should be
// stopped at once: it is only retrying what cannot succeed.
type stopper interface {
	// stopNow is the reason, once a line showed one; "" until then.
	stopNow() string
}

func (p *claudeParser) stopNow() string { return p.fatal }

// apiRetry records an api_retry line; a retry of a refused key is fatal.
func (p *claudeParser) apiRetry(l claudeLine) {
	if !fatalAPIStatus(l.ErrorStatus) || p.fatal != "" {
		return
	}
	var kind string
	_ = json.Unmarshal(l.Error, &kind)
	p.cond.apiError = &phases.AgentAPIError{Code: kind, Status: l.ErrorStatus, Message: "the model API refused the key"}
	p.fatal = "the model API answered " + apiRetryText(l) + ": retrying cannot help"
}
