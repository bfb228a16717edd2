package agentcmd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// NewClaudeParser returns the parser for Claude Code's
// `-p --output-format stream-json --verbose` output: one JSON object per line,
// of type "system" (subtype "init" carries session_id and model; hook
// subtypes may come first), "assistant" and "user" (Anthropic messages whose
// content blocks are text, thinking, tool_use and tool_result; a subagent's
// messages carry the parent_tool_use_id of the Task call that started it),
// "stream_event" (partial messages), "rate_limit_event" and, last, "result"
// (subtype, is_error, result, session_id, total_cost_usd, usage, modelUsage,
// num_turns, errors).
//
// Tokens and cost come from the result line. Its modelUsage, summed over the
// models, is the whole run's usage, subagents and helper models included,
// and matches total_cost_usd; its usage field counts the main conversation
// only, so it is used only when modelUsage is missing or empty. When the run
// ends without a result (killed, crashed), tokens are summed from the
// assistant messages seen, counting each message id once (Claude Code repeats
// a message's usage on every line that carries one of its content blocks, and
// the output count there can be a partial one).
//
// The model is the main conversation's: from init and the assistant
// messages that no subagent sent, never the "<synthetic>" model of the
// messages Claude Code makes up for an API error. A result with is_error or
// an error subtype is an agent error; so is an API error that an assistant
// message reported (its "error" field, such as rate_limit or
// authentication_failed) when no result follows.
func NewClaudeParser() OutputParser {
	return &claudeParser{messageUsage: map[string]phases.TokenUsage{}}
}

type claudeParser struct {
	sum          Summary
	sawResult    bool
	messageUsage map[string]phases.TokenUsage
	messageOrder []string
	// apiError is the last API error an assistant message reported, as
	// "code: text".
	apiError string
	cond     conditions
	// fatal says why the agent should be stopped at once (stopper).
	fatal string
}

type claudeUsage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

func (u claudeUsage) tokens() phases.TokenUsage {
	return phases.TokenUsage{
		Input:      u.InputTokens,
		Output:     u.OutputTokens,
		CacheRead:  u.CacheReadInputTokens,
		CacheWrite: u.CacheCreationInputTokens,
	}
}

type claudeBlock struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	Thinking  string          `json:"thinking"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	Content   json.RawMessage `json:"content"`
	IsError   bool            `json:"is_error"`
	ToolUseID string          `json:"tool_use_id"`
	ID        string          `json:"id"`
}

type claudeLine struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	// ParentToolUseID is set on the messages of a subagent.
	ParentToolUseID string `json:"parent_tool_use_id"`
	// Error names the API error of an assistant message Claude Code made up
	// to report it (authentication_failed, rate_limit, ...). Raw, so that a
	// line whose error is not a string still decodes.
	Error   json.RawMessage `json:"error"`
	Message *struct {
		ID      string          `json:"id"`
		Model   string          `json:"model"`
		Content json.RawMessage `json:"content"`
		Usage   *claudeUsage    `json:"usage"`
	} `json:"message"`
	Event *struct {
		Type  string `json:"type"`
		Delta *struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			Thinking string `json:"thinking"`
		} `json:"delta"`
	} `json:"event"`
	// result
	IsError      bool            `json:"is_error"`
	Result       string          `json:"result"`
	TotalCostUSD float64         `json:"total_cost_usd"`
	Usage        *claudeUsage    `json:"usage"`
	NumTurns     int             `json:"num_turns"`
	Errors       json.RawMessage `json:"errors"`
	// ModelUsage is keyed by model name.
	ModelUsage map[string]json.RawMessage `json:"modelUsage"`
	// APIErrorStatus is the HTTP status of the failing API call of an
	// is_error result whose subtype is success (Claude Code 2.1.110 on).
	APIErrorStatus int `json:"api_error_status"`
	// PermissionDenials lists the tool calls refused during the run:
	// {tool_name, tool_use_id, tool_input}.
	PermissionDenials []claudeDenial `json:"permission_denials"`
	// DeferredToolUse is a tool call a PreToolUse hook deferred: the run
	// stopped to wait for a decision.
	DeferredToolUse *struct {
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"deferred_tool_use"`
	// system api_retry: Claude Code waits to retry a failed API call by
	// itself (its Error holds the error's kind: rate_limit, overloaded, ...).
	Attempt      int     `json:"attempt"`
	MaxRetries   int     `json:"max_retries"`
	RetryDelayMS float64 `json:"retry_delay_ms"`
	ErrorStatus  int     `json:"error_status"`
	// rate_limit_event
	RateLimitInfo *struct {
		Status        string  `json:"status"`
		ResetsAt      float64 `json:"resetsAt"`
		RateLimitType string  `json:"rateLimitType"`
	} `json:"rate_limit_info"`
	// control_request: a permission prompt (subtype can_use_tool) waiting
	// for the host to answer on stdin.
	Request *struct {
		Subtype  string          `json:"subtype"`
		ToolName string          `json:"tool_name"`
		Input    json.RawMessage `json:"input"`
	} `json:"request"`
}

type claudeDenial struct {
	ToolName  string          `json:"tool_name"`
	ToolUseID string          `json:"tool_use_id"`
	ToolInput json.RawMessage `json:"tool_input"`
}

// claudeModelUsage is one model's entry in a result's modelUsage. Its
// inputTokens, like usage's input_tokens, exclude cached input.
type claudeModelUsage struct {
	InputTokens              int64   `json:"inputTokens"`
	OutputTokens             int64   `json:"outputTokens"`
	CacheReadInputTokens     int64   `json:"cacheReadInputTokens"`
	CacheCreationInputTokens int64   `json:"cacheCreationInputTokens"`
	CostUSD                  float64 `json:"costUSD"`
}

// syntheticModel is the model name Claude Code gives the assistant messages
// it makes up itself, such as the one reporting an API error.
const syntheticModel = "<synthetic>"

func (p *claudeParser) ParseLine(line string) (phases.StreamKind, string) {
	var l claudeLine
	if !decodeObject(line, &l) || l.Type == "" {
		return phases.StreamText, line
	}
	if l.SessionID != "" {
		p.sum.SessionID = l.SessionID
	}
	switch l.Type {
	case "system":
		if l.Model != "" && l.Model != syntheticModel {
			p.sum.Model = l.Model
		}
		switch l.Subtype {
		case "init":
			return phases.StreamSystem, fmt.Sprintf("session %s started (model %s)", l.SessionID, l.Model)
		case "api_retry":
			p.apiRetry(l)
			return phases.StreamRetry, apiRetryText(l)
		}
		return phases.StreamSystem, l.Subtype
	case "assistant", "user":
		return p.message(l)
	case "stream_event":
		if l.Event != nil && l.Event.Delta != nil {
			switch l.Event.Delta.Type {
			case "text_delta":
				return phases.StreamText, l.Event.Delta.Text
			case "thinking_delta":
				return phases.StreamReasoning, l.Event.Delta.Thinking
			}
		}
		return phases.StreamSystem, ""
	case "result":
		return p.result(l)
	case "rate_limit_event":
		return p.rateLimitEvent(l)
	case "control_request":
		return p.controlRequest(l)
	}
	return phases.StreamSystem, l.Type
}

func (p *claudeParser) message(l claudeLine) (phases.StreamKind, string) {
	if l.Message == nil {
		return phases.StreamText, ""
	}
	if l.Type == "assistant" {
		if m := l.Message.Model; m != "" && m != syntheticModel && l.ParentToolUseID == "" {
			p.sum.Model = m
		}
		var code string
		if json.Unmarshal(l.Error, &code) == nil && code != "" {
			p.apiError = code
			// rawText gives the JSON back when no block has text.
			text := rawText(l.Message.Content)
			if strings.HasPrefix(text, "[") {
				text = ""
			}
			if text != "" {
				p.apiError += ": " + text
			}
			p.assistantError(code, text)
		}
		if l.Message.Usage != nil && l.Message.ID != "" {
			if _, seen := p.messageUsage[l.Message.ID]; !seen {
				p.messageOrder = append(p.messageOrder, l.Message.ID)
			}
			p.messageUsage[l.Message.ID] = l.Message.Usage.tokens()
		}
	}
	var blocks []claudeBlock
	if json.Unmarshal(l.Message.Content, &blocks) != nil {
		// A user message with plain string content: a replayed prompt.
		return phases.StreamText, rawText(l.Message.Content)
	}
	kind := phases.StreamKind("")
	var texts []string
	for _, b := range blocks {
		switch b.Type {
		case "text":
			kind = strongerKind(kind, phases.StreamText)
			texts = append(texts, b.Text)
		case "thinking":
			kind = strongerKind(kind, phases.StreamReasoning)
			texts = append(texts, b.Thinking)
		case "tool_use", "server_tool_use":
			kind = strongerKind(kind, phases.StreamToolUse)
			texts = append(texts, b.Name+" "+toolInputSummary(b.Input))
			if b.Name == askUserQuestion && b.ID != "" {
				if q, ok := questionText(b.Input); ok {
					p.cond.ask(b.ID, phases.AgentQuestion{Tool: askUserQuestion, Text: q})
				}
			}
		case "tool_result":
			if !b.IsError {
				p.cond.answer(b.ToolUseID)
			}
			kind = strongerKind(kind, phases.StreamToolUse)
			prefix := "tool result: "
			if b.IsError {
				prefix = "tool error: "
			}
			texts = append(texts, prefix+clip(rawText(b.Content), maxEventText))
		}
	}
	if kind == "" {
		kind = phases.StreamText
	}
	return kind, strings.Join(texts, "\n")
}

// strongerKind picks the kind that describes a message with blocks of both
// kinds: a tool call matters more than its commentary, and commentary more
// than reasoning.
func strongerKind(a, b phases.StreamKind) phases.StreamKind {
	rank := func(k phases.StreamKind) int {
		switch k {
		case phases.StreamToolUse:
			return 3
		case phases.StreamText:
			return 2
		case phases.StreamReasoning:
			return 1
		}
		return 0
	}
	if rank(b) > rank(a) {
		return b
	}
	return a
}

func (p *claudeParser) result(l claudeLine) (phases.StreamKind, string) {
	p.sawResult = true
	p.sum.Result = l.Result
	p.sum.CostUSD = l.TotalCostUSD
	p.sum.NumTurns = l.NumTurns
	// total_cost_usd and modelUsage are the session's running totals: a
	// resumed session's result counts its earlier runs too (Claude Code
	// 2.1.328; its usage field counts this run's main conversation only).
	p.sum.CumulativeTokens, p.sum.CumulativeCost = true, true
	byModel, top := modelUsage(l.ModelUsage)
	switch {
	case len(byModel) > 0:
		p.sum.Tokens = phases.TokenUsage{}
		for _, u := range byModel {
			p.sum.Tokens = p.sum.Tokens.Add(u)
		}
	case l.Usage != nil:
		p.sum.Tokens = l.Usage.tokens()
	}
	if p.sum.Model == "" {
		p.sum.Model = top
	}
	p.sum.AgentError = ""
	if l.IsError || strings.HasPrefix(l.Subtype, "error") {
		p.sum.AgentError = p.resultError(l)
		p.resultAPIError(l)
	} else {
		// The run went on past whatever limit or error it met: neither
		// ended it.
		p.cond.rateLimit, p.cond.apiError = nil, nil
	}
	p.resultDenials(l)
	text := l.Result
	if text == "" {
		text = l.Subtype
	}
	return phases.StreamResult, text
}

// resultError describes the failure an error result reports: its subtype
// (unless that is "success", as it is when an API error ended the run) or
// the API error an assistant message named, then the errors list or the
// result text.
func (p *claudeParser) resultError(l claudeLine) string {
	detail := errorList(l.Errors)
	if detail == "" {
		detail = l.Result
	}
	var label string
	switch {
	case l.Subtype != "" && l.Subtype != "success":
		label = l.Subtype
	case p.apiError != "":
		code, _, _ := strings.Cut(p.apiError, ": ")
		label = code
	}
	switch {
	case label == "" && detail == "":
		return "error"
	case label == "":
		return detail
	case detail == "":
		return label
	}
	return label + ": " + detail
}

// modelUsage decodes a result's modelUsage into token counts by model, and
// names the model that cost the most (the one that did the work, as a
// subagent's or helper's model usually costs less). Entries that do not
// decode are skipped.
func modelUsage(raw map[string]json.RawMessage) (byModel map[string]phases.TokenUsage, top string) {
	byModel = make(map[string]phases.TokenUsage, len(raw))
	models := make([]string, 0, len(raw))
	for m := range raw {
		models = append(models, m)
	}
	sort.Strings(models) // a cost tie goes to the first name, every time
	topCost := -1.0
	for _, m := range models {
		var u claudeModelUsage
		if json.Unmarshal(raw[m], &u) != nil {
			continue
		}
		byModel[m] = phases.TokenUsage{
			Input:      u.InputTokens,
			Output:     u.OutputTokens,
			CacheRead:  u.CacheReadInputTokens,
			CacheWrite: u.CacheCreationInputTokens,
		}
		if m != syntheticModel && u.CostUSD > topCost {
			top, topCost = m, u.CostUSD
		}
	}
	return byModel, top
}

func (p *claudeParser) Summary() Summary {
	s := p.sum
	if !p.sawResult {
		for _, id := range p.messageOrder {
			s.Tokens = s.Tokens.Add(p.messageUsage[id])
		}
		s.AgentError = p.apiError
	}
	p.cond.fill(&s)
	return s
}

// toolInputSummary renders a tool call's input for a human: the field that
// names what the tool acts on when there is one, else the compact JSON.
func toolInputSummary(input json.RawMessage) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(input, &fields) == nil {
		for _, key := range []string{"command", "file_path", "path", "pattern", "url", "query", "description"} {
			if v, ok := fields[key]; ok {
				return clip(rawText(v), maxEventText)
			}
		}
	}
	return clip(string(input), maxEventText)
}

// errorList renders the result's errors field: a list of strings in the
// versions seen, anything else as JSON.
func errorList(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var list []string
	if json.Unmarshal(raw, &list) == nil {
		return strings.Join(list, "; ")
	}
	return clip(string(raw), maxEventText)
}
