package modeltest

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Script is one scripted conversation. Each agent session (one CLI run, or a
// resumed one: see Server) whose prompt contains Match gets its own copy of
// the script and is answered with its turns.
type Script struct {
	// Name identifies the script in records and messages. Default: "script
	// N" (its position in Config.Scripts, from 1).
	Name string
	// Match selects the script: a session whose prompt (every user message
	// before the model's first answer) contains Match gets it. Scripts are
	// tried in order; an empty Match selects any session, so put such a
	// script last. Default: "" (any session).
	Match string
	// Turns answer the session's requests, one each. The first remaining
	// turn whose When matches is served and the turns before it are skipped;
	// a session with no matching turn left gets the fallback answer. Required
	// (at least one).
	Turns []Turn
}

// Turn is one answer of the model: text, tool calls, or an API error.
type Turn struct {
	// When, if set, lets the turn fire only when the request's latest input
	// (the user messages and tool results after the model's last answer)
	// contains it. Default: "" (fires on any request).
	When string
	// Text is the assistant's text; with Calls it comes before them. A turn
	// with neither Text, Calls nor Error answers with an empty text.
	Text string
	// Calls are the tool calls, in order, all in one response. Build them
	// with Shell, WriteFile, Tool or Custom.
	Calls []Call
	// Error, if set, answers with this API error instead (Text and Calls are
	// ignored). RateLimited, Overloaded, Unauthorized and ServerError build
	// common ones.
	Error *APIError
	// Usage is the token usage served with the answer. Default:
	// Config.Usage.
	Usage *Usage
	// Delay holds the answer back this long, measured on Config.Clock (a
	// fake clock lets a test decide when it passes). It ends early, with no
	// answer, when the request is cancelled or the server closes.
	// Default: 0.
	Delay time.Duration
	// Wait, if set, holds the answer back until the channel is closed (or
	// the request is cancelled or the server closes). Default: nil.
	Wait <-chan struct{}
	// Reply, if set, makes the answer from the request when the turn fires:
	// its Text, Calls and Error replace the turn's, and its Usage, Delay and
	// Wait replace the turn's when set. For answers that carry something
	// only the prompt knows (an assignment id, a report key). It is called
	// on the request's goroutine and must not block. Default: nil.
	Reply func(Input) Turn
}

// Input is what a Reply sees of the request it answers.
type Input struct {
	// Prompt is the text of every user message before the model's first
	// answer (the agent's prompt); Latest the user messages and tool
	// results after the model's last answer.
	Prompt, Latest string
}

// Call is one tool call of a Turn.
type Call struct {
	// Name is the tool's name as the CLI offers it ("Bash", "Write",
	// "mcp__foreman__report", "exec_command").
	Name string
	// Input is the tool's input, marshalled to JSON (a map, a struct, or a
	// json.RawMessage).
	Input any

	// shell and file make the call portable between the APIs: see Shell and
	// WriteFile.
	shell      string
	file, body string
	// custom is set for a freeform (custom) tool call: Input is its text.
	custom bool
}

// Shell is a tool call running a shell command, served in each API's own
// shape: the Bash tool ({"command": cmd}) on the Anthropic Messages API;
// run_shell_command ({"command": cmd}) on the Gemini API; on
// the Responses API (Codex) the exec_command function ({"cmd": cmd}) when the
// request offers it, else the exec custom tool with JavaScript calling
// tools.exec_command, else a shell function ({"command": ["bash","-lc",cmd]}).
func Shell(cmd string) Call {
	return Call{Name: "Bash", Input: map[string]any{"command": cmd, "description": "modeltest: run a command"}, shell: cmd}
}

// WriteFile is a tool call writing content to path: Claude Code's Write
// tool ({"file_path": path, "content": content}; Claude Code wants an
// absolute path) on the Anthropic Messages API, write_file (the same input;
// Gemini CLI refuses a path outside its workspace directories) on the Gemini
// API, a shell command (printf into the file) on the Responses API.
func WriteFile(path, content string) Call {
	return Call{Name: "Write", Input: map[string]any{"file_path": path, "content": content}, file: path, body: content}
}

// Tool is a call of the named tool with input (marshalled to JSON). On the
// Anthropic Messages API a tool the request defers (not offered, while
// ToolSearch is) is loaded first: the server answers with ToolSearch
// {"query":"select:<name>"} and serves the turn on the next request. On the
// Responses API a tool that is not offered as a function is called through
// the exec custom tool when that is offered (JavaScript:
// tools.<name>(input)).
func Tool(name string, input any) Call { return Call{Name: name, Input: input} }

// Custom is a call of a freeform (custom) tool of the Responses API, its
// input sent as text; on the Anthropic Messages API it is a tool_use with
// input {"input": input}.
func Custom(name, input string) Call { return Call{Name: name, Input: input, custom: true} }

// LoadTools is a turn calling Claude Code's ToolSearch to load deferred
// tools: {"query":"select:a,b"}. Tool does this by itself when needed; use
// LoadTools to script it explicitly.
func LoadTools(names ...string) Turn {
	return Turn{Calls: []Call{Tool("ToolSearch", map[string]any{"query": "select:" + strings.Join(names, ","), "max_results": len(names)})}}
}

// Say is a turn answering with text only: the final answer of a run.
func Say(text string) Turn { return Turn{Text: text} }

// Do is a turn making the calls, all in one response.
func Do(calls ...Call) Turn { return Turn{Calls: calls} }

// Times repeats a turn n times, for a script to spread into its Turns:
// append(modeltest.Times(3, modeltest.RateLimited(0)), modeltest.Say("ok")).
func Times(n int, t Turn) []Turn {
	out := make([]Turn, n)
	for i := range out {
		out[i] = t
	}
	return out
}

// Usage is token usage, as served in a response.
type Usage struct {
	// InputTokens is the input (prompt) tokens. The Anthropic API counts
	// them without the cached ones; the Responses API and the Gemini API
	// count cached ones in (input_tokens, promptTokenCount there is served
	// as InputTokens, and cached_tokens, cachedContentTokenCount as
	// CacheReadInputTokens, so keep CacheReadInputTokens <= InputTokens for
	// Codex and Gemini CLI).
	InputTokens int64 `json:"input_tokens"`
	// OutputTokens is the generated tokens.
	OutputTokens int64 `json:"output_tokens"`
	// CacheCreationInputTokens is the tokens written to the prompt cache
	// (Anthropic only).
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	// CacheReadInputTokens is the tokens read from the prompt cache.
	CacheReadInputTokens int64 `json:"cache_read_input_tokens"`
}

// Add returns the sum of u and v.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		InputTokens:              u.InputTokens + v.InputTokens,
		OutputTokens:             u.OutputTokens + v.OutputTokens,
		CacheCreationInputTokens: u.CacheCreationInputTokens + v.CacheCreationInputTokens,
		CacheReadInputTokens:     u.CacheReadInputTokens + v.CacheReadInputTokens,
	}
}

// APIError is an error response of the API. The body has each API's error
// shape: {"type":"error","error":{"type":Type,"message":Message}}
// (Anthropic), {"error":{"type":Type,"code":Code,"message":Message}}
// (OpenAI) or {"error":{"code":Status,"message":Message,"status":Type}}
// (Gemini, Type defaulting to the RPC status: UNAUTHENTICATED,
// RESOURCE_EXHAUSTED, UNAVAILABLE, INTERNAL, ...).
type APIError struct {
	// Status is the HTTP status code. Required.
	Status int
	// Type is the error type. Default: by Status (Anthropic's names:
	// authentication_error, rate_limit_error, overloaded_error, api_error,
	// invalid_request_error).
	Type string
	// Code is the OpenAI error code. Default: by Status
	// (rate_limit_exceeded, invalid_api_key, server_error).
	Code string
	// Message is the error message. Default: one naming the status.
	Message string
	// Header is added to the response's headers (retry-after, rate-limit
	// headers). Default: none.
	Header http.Header
}

// RateLimited is a 429 turn with retry-after (whole seconds, rounded up) and
// the anthropic-ratelimit-* and x-ratelimit-* headers of an exhausted
// request limit.
func RateLimited(retryAfter time.Duration) Turn {
	secs := int64((retryAfter + time.Second - 1) / time.Second)
	h := http.Header{}
	h.Set("retry-after", strconv.FormatInt(secs, 10))
	reset := time.Unix(0, 0).UTC().Add(retryAfter).Format(time.RFC3339)
	h.Set("anthropic-ratelimit-requests-limit", "50")
	h.Set("anthropic-ratelimit-requests-remaining", "0")
	h.Set("anthropic-ratelimit-requests-reset", reset)
	h.Set("anthropic-ratelimit-tokens-limit", "100000")
	h.Set("anthropic-ratelimit-tokens-remaining", "100000")
	h.Set("anthropic-ratelimit-tokens-reset", reset)
	h.Set("x-ratelimit-limit-requests", "50")
	h.Set("x-ratelimit-remaining-requests", "0")
	h.Set("x-ratelimit-reset-requests", fmt.Sprintf("%ds", secs))
	return Turn{Error: &APIError{Status: http.StatusTooManyRequests, Header: h,
		Message: "modeltest: rate limited (scripted 429)"}}
}

// Overloaded is a 529 overloaded_error turn (Anthropic's "Overloaded").
func Overloaded() Turn {
	return Turn{Error: &APIError{Status: 529, Message: "Overloaded"}}
}

// Unauthorized is a 401 turn: authentication_error "invalid x-api-key" on
// the Anthropic API, invalid_api_key "Incorrect API key provided" on the
// Responses API, UNAUTHENTICATED "API key not valid" on the Gemini API.
func Unauthorized() Turn {
	return Turn{Error: &APIError{Status: http.StatusUnauthorized}}
}

// ServerError is a 500 api_error turn.
func ServerError() Turn {
	return Turn{Error: &APIError{Status: http.StatusInternalServerError, Message: "Internal server error"}}
}

func (e *APIError) anthropicType() string {
	if e.Type != "" {
		return e.Type
	}
	switch e.Status {
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusRequestEntityTooLarge:
		return "request_too_large"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	if e.Status >= 500 {
		return "api_error"
	}
	return "invalid_request_error"
}

func (e *APIError) openAICode() (typ, code string) {
	typ, code = e.Type, e.Code
	def := func(t, c string) {
		if typ == "" {
			typ = t
		}
		if code == "" {
			code = c
		}
	}
	switch {
	case e.Status == http.StatusUnauthorized:
		def("invalid_request_error", "invalid_api_key")
	case e.Status == http.StatusTooManyRequests:
		def("requests", "rate_limit_exceeded")
	case e.Status >= 500:
		def("server_error", "server_error")
	default:
		def("invalid_request_error", "invalid_request")
	}
	return typ, code
}

func (e *APIError) message(api API) string {
	if e.Message != "" {
		return e.Message
	}
	if e.Status == http.StatusUnauthorized {
		if api == Gemini {
			return "API key not valid. Please pass a valid API key."
		}
		if api == OpenAI {
			return "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys."
		}
		return "invalid x-api-key"
	}
	return fmt.Sprintf("modeltest: scripted %d %s", e.Status, http.StatusText(e.Status))
}
