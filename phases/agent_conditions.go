package phases

import "time"

// AgentRateLimit says that the provider refused the agent's requests
// because a rate or usage limit was reached. Retrying before ResetsAt is
// pointless; the failure is the provider's, not the agent's.
type AgentRateLimit struct {
	// ResetsAt is when the provider said the limit resets; zero when it
	// named no time (or named one the driver could not read).
	ResetsAt time.Time
	// Window names the limit when the provider does (Claude Code:
	// five_hour, seven_day, ...).
	Window string
	// Message is the provider's own text, when it gave one.
	Message string
}

// AgentAPIError is an error the model provider's API returned that ended
// the agent's run (authentication, billing, overload, server error). A
// rate limit is reported as AgentRateLimit instead.
type AgentAPIError struct {
	// Code is the error's kind as the agent names it (Claude Code:
	// authentication_failed, billing_error, invalid_request, server_error,
	// unknown); empty when it names none.
	Code string
	// Status is the HTTP status of the failing request, when reported.
	Status int
	// Message is the error's text.
	Message string
}

// AgentPermissionDenial is a tool call the agent's permission settings
// refused (a tool not allowed in a non-interactive run, a command the
// sandbox policy declined).
type AgentPermissionDenial struct {
	// Tool is the tool's name (Bash, Write, ...; Codex: command).
	Tool string
	// Input says what the call would have done: the command, the file, or
	// the call's input as JSON.
	Input string
}

// AgentQuestion is a question the agent asked a person and got no answer
// to: a Claude Code AskUserQuestion refused in a non-interactive run or
// left unanswered, a permission prompt waiting for a person, a tool call a
// hook deferred for a decision, a Codex request_user_input. Only a person
// can answer it.
type AgentQuestion struct {
	// Tool is what asked (AskUserQuestion, can_use_tool,
	// request_user_input, or the deferred tool's name).
	Tool string
	// Text is the question, with its options when the agent offered some.
	Text string
}
