package agentcmd

import (
	"bytes"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// NewGeminiParser returns the parser for Gemini CLI's `--output-format
// stream-json` output (packages/core/src/output/types.ts, JsonStreamEvent):
// one JSON object per line, of type
//   - init: session_id (what --resume takes) and model ("auto" when Gemini
//     CLI routes each request to a model of its choosing);
//   - message: role user (the prompt) or assistant; an assistant message
//     comes in pieces with delta true, to be joined;
//   - tool_use: tool_name, tool_id, parameters; tool_result: tool_id,
//     status success or error, output, error {type, message};
//   - error: severity warning or error, message (a turn limit, a blocked or
//     invalid response; warnings let the run go on);
//   - result, last: status success or error, error {type, message} when the
//     run failed, stats {input_tokens, output_tokens, cached, input,
//     total_tokens, duration_ms, tool_calls, models {<model>: the same}}.
//
// The result is the assistant's text after its last tool call (the pieces
// joined). Tokens come from the result's stats: input_tokens counts the
// cached tokens in, so Input is input_tokens less cached and CacheRead is
// cached. They are the run's own, the requests Gemini CLI makes beside the
// conversation (its model router's) included, and a resumed session's run
// counts only itself. The model is init's, or, when that is "auto", the
// last of stats.models (the router's model comes first, the conversation's
// after it).
//
// A result with status error is an agent error (with no error object, the
// last error event's message says why). An API error ("[API Error: ...]")
// is a rate limit when it is a 429 or a quota (RESOURCE_EXHAUSTED; "Suggested
// retry after Ns" names the reset), else an API error with the status Gemini
// CLI quotes. Gemini CLI retries a 429 and a 5xx by itself, up to 10 times,
// printing each retry on stderr only, never on this stream ("Attempt N
// failed with status S. Retrying with backoff... _ApiError: {...}"): the
// parser reads those stderr lines too (the Driver hands them to it), and
// each is a phases.StreamRetry event naming the status, the RPC status and
// the attempt, like Claude Code's api_retry ("model API 429
// RESOURCE_EXHAUSTED: retry 1 of 10"). Its stack trace's lines stay
// stderr.
//
// A tool call refused by Gemini CLI's rules is a permission denial: a tool
// its approval mode leaves out (tool_result error type tool_not_registered
// for run_shell_command, write_file, replace, web_fetch or an MCP tool: in a
// headless run's default mode none of them is offered), a policy_violation,
// and a path outside its workspace directories ("Path not in workspace").
func NewGeminiParser() OutputParser { return &geminiParser{tools: map[string]geminiTool{}} }

type geminiParser struct {
	sum Summary
	// text is the assistant's text since its last tool call; prev the text
	// before it, the result when nothing follows the last call.
	text, prev strings.Builder
	// inTurn is true from the model's first output of a turn to the next
	// tool result: NumTurns counts the turns' starts.
	inTurn    bool
	initModel string
	lastModel string // the last model stats.models lists
	sawResult bool
	status    string
	failure   string // the result's error message
	lastError string // the last error event of severity error
	tools     map[string]geminiTool
	cond      conditions
}

type geminiTool struct {
	name  string
	input json.RawMessage
}

type geminiStats struct {
	TotalTokens  int64  `json:"total_tokens"`
	InputTokens  int64  `json:"input_tokens"`
	OutputTokens int64  `json:"output_tokens"`
	Cached       int64  `json:"cached"`
	Input        *int64 `json:"input"`
}

type geminiLine struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Model      string          `json:"model"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Severity   string          `json:"severity"`
	Message    string          `json:"message"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		geminiStats
		ToolCalls int             `json:"tool_calls"`
		Models    json.RawMessage `json:"models"`
	} `json:"stats"`
}

func (p *geminiParser) ParseLine(line string) (phases.StreamKind, string) {
	var l geminiLine
	if !decodeObject(line, &l) || l.Type == "" {
		return phases.StreamText, line
	}
	switch l.Type {
	case "init":
		p.sum.SessionID = l.SessionID
		p.initModel = l.Model
		return phases.StreamSystem, "session " + l.SessionID + " started (model " + l.Model + ")"
	case "message":
		if l.Role != "assistant" {
			return phases.StreamSystem, "prompt"
		}
		p.startTurn()
		p.text.WriteString(l.Content)
		return phases.StreamText, l.Content
	case "tool_use":
		p.startTurn()
		if p.text.Len() > 0 {
			p.prev.Reset()
			p.prev.WriteString(p.text.String())
			p.text.Reset()
		}
		p.tools[l.ToolID] = geminiTool{name: l.ToolName, input: l.Parameters}
		return phases.StreamToolUse, l.ToolName + ": " + toolInputSummary(l.Parameters)
	case "tool_result":
		p.inTurn = false
		return p.toolResult(l)
	case "error":
		if l.Severity == "error" {
			p.lastError = l.Message
		}
		return phases.StreamSystem, orDefault(l.Severity, "error") + ": " + l.Message
	case "result":
		return p.result(l)
	}
	return phases.StreamSystem, l.Type
}

func (p *geminiParser) startTurn() {
	if !p.inTurn {
		p.inTurn = true
		p.sum.NumTurns++
	}
}

// geminiGated are the built-in tools a headless run's default approval
// mode does not offer (they would need a person's confirmation).
var geminiGated = map[string]bool{"run_shell_command": true, "write_file": true, "replace": true, "web_fetch": true}

func (p *geminiParser) toolResult(l geminiLine) (phases.StreamKind, string) {
	tool := p.tools[l.ToolID]
	name := orDefault(tool.name, l.ToolID)
	if l.Status != "error" {
		return phases.StreamToolUse, name + " done"
	}
	typ, msg := "", l.Output
	if l.Error != nil {
		typ, msg = l.Error.Type, orDefault(l.Error.Message, l.Output)
	}
	refused := typ == "policy_violation" || typ == "path_not_in_workspace" ||
		strings.HasPrefix(msg, "Path not in workspace") ||
		(typ == "tool_not_registered" && (geminiGated[tool.name] || strings.HasPrefix(tool.name, "mcp_")))
	if refused {
		p.cond.deny(phases.AgentPermissionDenial{Tool: name, Input: toolInputSummary(tool.input)})
		return phases.StreamToolUse, name + " refused: " + clip(msg, maxEventText)
	}
	return phases.StreamToolUse, name + " failed: " + clip(msg, maxEventText)
}

func (p *geminiParser) result(l geminiLine) (phases.StreamKind, string) {
	p.sawResult = true
	p.status = l.Status
	if l.Error != nil {
		p.failure = orDefault(l.Error.Message, l.Error.Type)
	}
	text := "result " + l.Status
	if s := l.Stats; s != nil {
		p.sum.Tokens = s.tokens()
		if names := objectKeys(s.Models); len(names) > 0 {
			p.lastModel = names[len(names)-1]
		}
		text += fmt.Sprintf(": %d input (%d cached), %d output tokens, %d tool calls",
			s.InputTokens, s.Cached, s.OutputTokens, s.ToolCalls)
	}
	if p.failure != "" {
		text += ": " + p.failure
	}
	return phases.StreamResult, text
}

func (s geminiStats) tokens() phases.TokenUsage {
	cached := max(0, min(s.Cached, s.InputTokens))
	input := s.InputTokens - cached
	if s.Input != nil {
		input = *s.Input
	}
	return phases.TokenUsage{Input: input, Output: s.OutputTokens, CacheRead: cached}
}

func (p *geminiParser) Summary() Summary {
	s := p.sum
	s.Result = p.text.String()
	if s.Result == "" {
		s.Result = p.prev.String()
	}
	s.Model = p.initModel
	if (s.Model == "" || s.Model == "auto") && p.lastModel != "" {
		s.Model = p.lastModel
	}
	if p.sawResult && p.status != "success" {
		s.AgentError = orDefault(p.failure, orDefault(p.lastError, "gemini: result status "+orDefault(p.status, "unknown")))
	} else if !p.sawResult && p.lastError != "" {
		s.AgentError = p.lastError
	}
	p.cond.rateLimit, p.cond.apiError = nil, nil
	if s.AgentError != "" && strings.Contains(s.AgentError, "[API Error") {
		p.cond.rateLimit, p.cond.apiError = classifyGeminiError(s.AgentError)
	}
	p.cond.fill(&s)
	return s
}

// objectKeys are the keys of a JSON object in their order; none for
// anything else.
func objectKeys(raw json.RawMessage) []string {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return nil
	}
	var keys []string
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return keys
		}
		k, _ := t.(string)
		var skip json.RawMessage
		if dec.Decode(&skip) != nil {
			return keys
		}
		keys = append(keys, k)
	}
	return keys
}

// What Gemini CLI's API errors say (parseAndFormatApiError): "[API Error:
// <message> (Status: <RPC status>)]", or the server's JSON body quoted whole
// ({"error":{"code":401,...,"status":"UNAUTHENTICATED"}}); a 429 adds "Please
// wait and try again later..." and a quota's retry delay "Suggested retry
// after 60s.".
var (
	geminiCode      = regexp.MustCompile(`"code"\s*:\s*(\d{3})`)
	geminiRPCStatus = regexp.MustCompile(`(?:"status"\s*:\s*"|\(Status: )([A-Z_]+)`)
	geminiQuota     = regexp.MustCompile(`(?i)RESOURCE_EXHAUSTED|"code"\s*:\s*429|quota|rate limit|Please wait and try again later|Suggested retry after`)
)

// classifyGeminiError sorts a Gemini CLI API error into a rate limit or an
// API error.
func classifyGeminiError(msg string) (*phases.AgentRateLimit, *phases.AgentAPIError) {
	if geminiQuota.MatchString(msg) {
		return &phases.AgentRateLimit{Message: msg}, nil
	}
	e := &phases.AgentAPIError{Message: msg}
	if m := geminiCode.FindStringSubmatch(msg); m != nil {
		e.Status, _ = strconv.Atoi(m[1])
	}
	rpc := ""
	if m := geminiRPCStatus.FindStringSubmatch(msg); m != nil {
		rpc = m[1]
	}
	switch {
	case e.Status == 401, e.Status == 403, rpc == "UNAUTHENTICATED", rpc == "PERMISSION_DENIED",
		strings.Contains(msg, "API key not valid"):
		e.Code = "authentication_failed"
	case e.Status >= 500, rpc == "UNAVAILABLE", rpc == "INTERNAL", rpc == "DEADLINE_EXCEEDED":
		e.Code = "server_error"
	case e.Status == 400, rpc == "INVALID_ARGUMENT", rpc == "FAILED_PRECONDITION":
		e.Code = "invalid_request"
	case e.Status == 404, rpc == "NOT_FOUND":
		e.Code = "model_not_found"
	}
	return nil, e
}

// stderrParser is a parser that also reads the agent's stderr lines: a
// line it recognizes becomes an event of the kind it says (ok), any other
// stays phases.StreamStderr.
type stderrParser interface {
	parseStderr(line string) (kind phases.StreamKind, text string, ok bool)
}

// geminiRetry is Gemini CLI's retry notice on stderr (retryWithBackoff):
// "Attempt 2 failed with status 429. Retrying with backoff... _ApiError:
// {"error":{"code":429,...,"status":"RESOURCE_EXHAUSTED"}}".
var geminiRetry = regexp.MustCompile(`^Attempt (\d+) failed(?: with status (\d+))?\. Retrying with backoff\.\.\.(.*)$`)

// geminiMaxAttempts is Gemini CLI 0.61's retryWithBackoff maxAttempts for a
// model call: the first attempt and 9 retries.
const geminiMaxAttempts = 10

func (p *geminiParser) parseStderr(line string) (phases.StreamKind, string, bool) {
	m := geminiRetry.FindStringSubmatch(strings.TrimSpace(line))
	if m == nil {
		return "", "", false
	}
	text := "model API"
	if m[2] != "" {
		text += " " + m[2]
	}
	if rpc := geminiRPCStatus.FindStringSubmatch(m[3]); rpc != nil {
		text += " " + rpc[1]
	}
	attempt, _ := strconv.Atoi(m[1])
	return phases.StreamRetry, fmt.Sprintf("%s: retry %d of %d", text, attempt, geminiMaxAttempts-1), true
}

var (
	_ OutputParser = (*geminiParser)(nil)
	_ stderrParser = (*geminiParser)(nil)
)
