package agentcmd

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// NewCodexParser returns the parser for `codex exec --json` output: one
// ThreadEvent per line (codex-rs/exec/src/exec_events.rs), of type
// thread.started (thread_id, the id `codex exec resume` takes),
// turn.started, turn.completed (usage: input_tokens, cached_input_tokens,
// output_tokens), turn.failed (error.message), item.started, item.updated
// and item.completed (an item of type agent_message, reasoning,
// command_execution, file_change, mcp_tool_call, web_search, todo_list,
// plan or error), item.plan.delta and error. Versions before the ThreadEvent
// stream (up to about 0.4x) printed a config line, a prompt line and then
// each protocol event as {"id": ..., "msg": {"type": ...}}; those lines are
// understood too (see codexLegacy).
//
// A turn.completed's usage is the running total of the thread, not the
// turn's own: codex exec fills it from the thread's total token usage, and a
// resumed thread starts from the total its rollout recorded. So the last
// turn.completed gives Tokens, marked CumulativeTokens. The last completed
// agent_message is the result, else the last completed plan (as in the
// Codex SDK's Thread.run). turn.failed is an agent error. A top-level error
// event is one too unless a later turn.completed shows the turn recovered
// (Codex reports transient stream errors, such as reconnect attempts, this
// way).
func NewCodexParser() OutputParser { return &codexParser{} }

type codexParser struct {
	sum Summary
	// fatal says why the agent should be stopped at once (stopper).
	fatal      string
	turnFailed string
	// streamError is the last top-level error not yet followed by a
	// completed turn.
	streamError string
	// plan is the last completed plan item, the result when no agent
	// message completes.
	plan string
	cond conditions
}

type codexItem struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	Command string `json:"command"`
	// ExitCode is absent while a command runs.
	ExitCode *int   `json:"exit_code"`
	Status   string `json:"status"`
	Message  string `json:"message"`
	Changes  []struct {
		Path string `json:"path"`
		Kind string `json:"kind"`
	} `json:"changes"`
	Server string `json:"server"`
	Tool   string `json:"tool"`
	Query  string `json:"query"`
	Items  []struct {
		Text      string `json:"text"`
		Completed bool   `json:"completed"`
	} `json:"items"`
}

// codexUsage is Codex's token usage. Its input_tokens include the cached
// ones.
type codexUsage struct {
	InputTokens       int64 `json:"input_tokens"`
	CachedInputTokens int64 `json:"cached_input_tokens"`
	OutputTokens      int64 `json:"output_tokens"`
}

func (u codexUsage) tokens() phases.TokenUsage {
	cached := max(0, min(u.CachedInputTokens, u.InputTokens))
	return phases.TokenUsage{Input: u.InputTokens - cached, Output: u.OutputTokens, CacheRead: cached}
}

type codexLine struct {
	Type     string      `json:"type"`
	ThreadID string      `json:"thread_id"`
	Item     *codexItem  `json:"item"`
	Usage    *codexUsage `json:"usage"`
	Error    *struct {
		Message string `json:"message"`
	} `json:"error"`
	Message string `json:"message"`
	Delta   string `json:"delta"`
	// request_user_input: the model asks the user (RequestUserInputEvent).
	CallID    string          `json:"call_id"`
	Questions json.RawMessage `json:"questions"`
	// Msg is set on the lines of the older {"id", "msg"} stream.
	Msg json.RawMessage `json:"msg"`
}

func (p *codexParser) ParseLine(line string) (phases.StreamKind, string) {
	var l codexLine
	if !decodeObject(line, &l) {
		return phases.StreamText, line
	}
	if l.Type == "" && len(l.Msg) > 0 {
		if kind, text, ok := p.legacy(l.Msg); ok {
			return kind, text
		}
	}
	if l.Type == "" {
		return phases.StreamText, line
	}
	switch l.Type {
	case "thread.started":
		p.sum.SessionID = l.ThreadID
		return phases.StreamSystem, "thread " + l.ThreadID + " started"
	case "turn.started":
		p.sum.NumTurns++
		return phases.StreamSystem, "turn started"
	case "turn.completed":
		p.streamError = ""
		if u := l.Usage; u != nil {
			p.sum.Tokens = u.tokens()
			p.sum.CumulativeTokens = true
			return phases.StreamResult, fmt.Sprintf("turn completed; thread total %d input (%d cached), %d output tokens",
				u.InputTokens, u.CachedInputTokens, u.OutputTokens)
		}
		return phases.StreamResult, "turn completed"
	case "turn.failed":
		msg := "turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		p.turnFailed = msg
		return phases.StreamResult, "turn failed: " + msg
	case "error":
		p.streamError = l.Message
		if p.streamError == "" {
			p.streamError = "error"
		}
		if strings.HasPrefix(l.Message, "Reconnecting...") {
			// "Reconnecting... 1/5 (unexpected status 401 Unauthorized: ...)":
			// Codex retries by itself; a refused key it retries in vain.
			if m := codexStatus.FindStringSubmatch(l.Message); m != nil && p.fatal == "" {
				if status, _ := strconv.Atoi(m[1]); fatalAPIStatus(status) {
					p.fatal = "the model API answered " + l.Message + ": retrying cannot help"
				}
			}
			return phases.StreamRetry, l.Message
		}
		return phases.StreamSystem, "error: " + l.Message
	case "item.started", "item.updated", "item.completed":
		if l.Item == nil {
			return phases.StreamSystem, l.Type
		}
		return p.item(l.Type == "item.completed", *l.Item)
	case "item.plan.delta":
		return phases.StreamText, l.Delta
	case "request_user_input":
		text, ok := questionText([]byte(`{"questions":` + orDefault(string(l.Questions), "null") + `}`))
		if !ok {
			text = "(the question's text was not in the output)"
		}
		p.cond.addQuestion(phases.AgentQuestion{Tool: "request_user_input", Text: text})
		return phases.StreamSystem, "waiting for a person: " + text
	}
	return phases.StreamSystem, l.Type
}

func (p *codexParser) item(completed bool, it codexItem) (phases.StreamKind, string) {
	switch it.Type {
	case "agent_message":
		if completed {
			p.sum.Result = it.Text
		}
		return phases.StreamText, it.Text
	case "plan":
		if completed {
			p.plan = it.Text
		}
		return phases.StreamText, it.Text
	case "reasoning":
		return phases.StreamReasoning, it.Text
	case "command_execution":
		if completed && it.Status == "declined" {
			p.cond.deny(phases.AgentPermissionDenial{Tool: "command", Input: it.Command})
		}
		text := "$ " + it.Command
		if it.ExitCode != nil {
			text += fmt.Sprintf(" (exit %d)", *it.ExitCode)
		} else if it.Status != "" && it.Status != "in_progress" {
			text += " (" + it.Status + ")"
		}
		return phases.StreamToolUse, text
	case "file_change":
		parts := make([]string, 0, len(it.Changes))
		for _, c := range it.Changes {
			parts = append(parts, c.Kind+" "+c.Path)
		}
		text := "files: " + strings.Join(parts, ", ")
		if it.Status != "" {
			text += " (" + it.Status + ")"
		}
		return phases.StreamToolUse, text
	case "mcp_tool_call":
		return phases.StreamToolUse, "mcp " + it.Server + "." + it.Tool + " (" + it.Status + ")"
	case "collab_tool_call":
		return phases.StreamToolUse, "collab " + it.Tool + " (" + it.Status + ")"
	case "web_search":
		return phases.StreamToolUse, "web search: " + it.Query
	case "todo_list":
		parts := make([]string, 0, len(it.Items))
		for _, t := range it.Items {
			mark := "[ ]"
			if t.Completed {
				mark = "[x]"
			}
			parts = append(parts, mark+" "+t.Text)
		}
		return phases.StreamSystem, strings.Join(parts, "\n")
	case "error":
		// A non-fatal error surfaced as an item; the turn goes on.
		return phases.StreamSystem, "warning: " + it.Message
	}
	return phases.StreamSystem, it.Type
}

func (p *codexParser) stopNow() string { return p.fatal }

func (p *codexParser) Summary() Summary {
	s := p.sum
	if s.Result == "" {
		s.Result = p.plan
	}
	switch {
	case p.turnFailed != "":
		s.AgentError = p.turnFailed
	case p.streamError != "":
		s.AgentError = p.streamError
	}
	p.cond.rateLimit, p.cond.apiError = nil, nil
	if s.AgentError != "" {
		p.cond.rateLimit, p.cond.apiError = classifyCodexError(s.AgentError)
	}
	p.cond.fill(&s)
	return s
}

// Compile-time checks that the parsers satisfy the interface.
var (
	_ OutputParser = (*codexParser)(nil)
	_ OutputParser = (*claudeParser)(nil)
	_ OutputParser = textParser{}
)
