package modeltest

import (
	"encoding/json"
	"net/http"
	"time"
)

// API names the wire protocol of a request.
type API string

// The APIs the server speaks.
const (
	// Anthropic is the Anthropic Messages API (POST /v1/messages), as Claude
	// Code calls it.
	Anthropic API = "anthropic"
	// OpenAI is the OpenAI Responses API (POST /v1/responses), as Codex
	// calls it.
	OpenAI API = "openai"
	// Gemini is the Gemini API (POST /v1beta/models/<model>:generateContent
	// and :streamGenerateContent?alt=sse), as Gemini CLI calls it.
	Gemini API = "gemini"
)

// Request is the record of one request the server received and what it
// served.
type Request struct {
	// Seq numbers the requests from 1 in order of arrival.
	Seq int
	// At is when it arrived, on Config.Clock.
	At time.Time
	// API is the protocol; "" for a request to another path.
	API API
	// Method and Path (with the query) of the request.
	Method, Path string
	// Header and Body as received.
	Header http.Header
	Body   []byte
	// Model and Stream as the request asked.
	Model  string
	Stream bool
	// Tools are the names of the tools offered, in order (the Responses
	// API's namespaced and additional tools included).
	Tools []string
	// Prompt is the text of every user message before the model's first
	// answer; Latest the text of the user messages and tool results after
	// its last one.
	Prompt, Latest string
	// Session is the conversation's key: the CLI's session header
	// (X-Claude-Code-Session-Id, Session-Id), else derived from the prompt.
	Session string
	// Side marks a side request (one offering no tools, such as a title or
	// summary request): it is answered with SideText and consumes no turn.
	Side bool
	// Script is the name of the script that answered; "" when none did.
	Script string
	// Turn is the index of the turn served in the script's Turns; -1 when
	// none was.
	Turn int
	// Unmatched is true when no script or turn matched and the fallback
	// answer was served.
	Unmatched bool
	// Served is what the server answered.
	Served Served
}

// Served is what the server answered to one request.
type Served struct {
	// Status is the HTTP status.
	Status int
	// Text is the assistant text served.
	Text string
	// Calls are the tool calls served, as sent.
	Calls []ServedCall
	// Usage is the token usage served (zero for an error).
	Usage Usage
	// Error is the API error served, if any.
	Error *APIError
	// Cancelled is true when the request ended (or the server closed)
	// during the turn's Delay or Wait: nothing was served.
	Cancelled bool
}

// ServedCall is one tool call as served.
type ServedCall struct {
	// ID is the call's id (tool_use id, or the Responses API's call_id).
	ID string
	// Name is the tool's name as sent.
	Name string
	// Input is the call's input: JSON, or the text of a custom tool call.
	Input json.RawMessage
}

// Sum returns the usage served to the requests.
func Sum(reqs []Request) Usage {
	var u Usage
	for _, r := range reqs {
		u = u.Add(r.Served.Usage)
	}
	return u
}
