package agentcmd

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// codexLegacyMsg is the msg of a line of the stream `codex exec --json`
// printed before the ThreadEvent stream: one protocol Event per line,
// {"id": ..., "msg": {"type": ..., ...}}, the EventMsg types of openai/codex
// codex-rs/core/src/protocol.rs (later codex-rs/protocol/src/protocol.rs).
type codexLegacyMsg struct {
	Type string `json:"type"`
	// session_configured
	SessionID string `json:"session_id"`
	Model     string `json:"model"`
	// agent_message, error, stream_error
	Message string `json:"message"`
	// agent_reasoning
	Text string `json:"text"`
	// agent_message_delta, agent_reasoning_delta
	Delta string `json:"delta"`
	// exec_command_begin: a list of arguments (a string in some versions)
	Command json.RawMessage `json:"command"`
	// exec_command_end
	ExitCode *int `json:"exit_code"`
	// patch_apply_begin: changes by path; patch_apply_end: success
	Changes json.RawMessage `json:"changes"`
	Success *bool           `json:"success"`
	// mcp_tool_call_begin and _end
	Invocation *struct {
		Server string `json:"server"`
		Tool   string `json:"tool"`
	} `json:"invocation"`
	// web_search_end
	Query string `json:"query"`
	// token_count: per-response usage flat in the msg in early versions,
	// later a TokenUsageInfo whose total_token_usage is the session's
	// running total.
	codexUsage
	// Info is raw so that "info": null (no usage yet, as in a rate-limit
	// update) is told apart from an early flat token_count.
	Info json.RawMessage `json:"info"`
	// task_complete
	LastAgentMessage *string `json:"last_agent_message"`
	// turn_aborted
	Reason string `json:"reason"`
}

// legacy interprets the msg of an older-format line. It reports false when
// msg is not an object with a type, so the line is treated like any other.
func (p *codexParser) legacy(raw json.RawMessage) (phases.StreamKind, string, bool) {
	var m codexLegacyMsg
	if json.Unmarshal(raw, &m) != nil || m.Type == "" {
		return "", "", false
	}
	switch m.Type {
	case "session_configured":
		if m.SessionID != "" {
			p.sum.SessionID = m.SessionID
		}
		if m.Model != "" {
			p.sum.Model = m.Model
		}
		return phases.StreamSystem, fmt.Sprintf("session %s configured (model %s)", m.SessionID, m.Model), true
	case "task_started":
		p.sum.NumTurns++
		return phases.StreamSystem, "turn started", true
	case "agent_message":
		if m.Message != "" {
			p.sum.Result = m.Message
		}
		return phases.StreamText, m.Message, true
	case "agent_message_delta":
		return phases.StreamText, m.Delta, true
	case "agent_reasoning":
		return phases.StreamReasoning, m.Text, true
	case "agent_reasoning_delta":
		return phases.StreamReasoning, m.Delta, true
	case "exec_command_begin":
		return phases.StreamToolUse, "$ " + commandLine(m.Command), true
	case "exec_command_end":
		if m.ExitCode != nil {
			return phases.StreamToolUse, fmt.Sprintf("command exited %d", *m.ExitCode), true
		}
		return phases.StreamToolUse, "command ended", true
	case "patch_apply_begin":
		var changes map[string]json.RawMessage
		_ = json.Unmarshal(m.Changes, &changes) // no paths if it is not a map
		paths := make([]string, 0, len(changes))
		for path := range changes {
			paths = append(paths, path)
		}
		sort.Strings(paths)
		return phases.StreamToolUse, "files: " + strings.Join(paths, ", "), true
	case "patch_apply_end":
		if m.Success != nil && !*m.Success {
			return phases.StreamToolUse, "patch failed", true
		}
		return phases.StreamToolUse, "patch applied", true
	case "mcp_tool_call_begin", "mcp_tool_call_end":
		if m.Invocation != nil {
			return phases.StreamToolUse, "mcp " + m.Invocation.Server + "." + m.Invocation.Tool, true
		}
		return phases.StreamToolUse, m.Type, true
	case "web_search_end":
		return phases.StreamToolUse, "web search: " + m.Query, true
	case "token_count":
		return p.legacyTokens(m)
	case "stream_error":
		// Codex retries the stream; task_complete shows it recovered.
		p.streamError = orDefault(m.Message, "stream error")
		return phases.StreamSystem, "error: " + m.Message, true
	case "error":
		// The exec processors of both formats treat this event as fatal for
		// the turn (the newer one turns it into turn.failed).
		p.turnFailed = orDefault(m.Message, "error")
		return phases.StreamSystem, "error: " + m.Message, true
	case "turn_aborted":
		p.turnFailed = "turn aborted: " + orDefault(m.Reason, "unknown reason")
		return phases.StreamResult, p.turnFailed, true
	case "task_complete":
		p.streamError = ""
		if m.LastAgentMessage != nil && *m.LastAgentMessage != "" {
			p.sum.Result = *m.LastAgentMessage
			return phases.StreamResult, *m.LastAgentMessage, true
		}
		return phases.StreamResult, "turn completed", true
	}
	return phases.StreamSystem, m.Type, true
}

func (p *codexParser) legacyTokens(m codexLegacyMsg) (phases.StreamKind, string, bool) {
	if len(m.Info) > 0 {
		var info struct {
			TotalTokenUsage *codexUsage `json:"total_token_usage"`
		}
		if json.Unmarshal(m.Info, &info) != nil || info.TotalTokenUsage == nil {
			return phases.StreamSystem, "token count", true
		}
		u := *info.TotalTokenUsage
		p.sum.Tokens = u.tokens()
		p.sum.CumulativeTokens = true
		return phases.StreamSystem, fmt.Sprintf("session total: %d input (%d cached), %d output tokens",
			u.InputTokens, u.CachedInputTokens, u.OutputTokens), true
	}
	u := m.codexUsage
	p.sum.Tokens = p.sum.Tokens.Add(u.tokens())
	return phases.StreamSystem, fmt.Sprintf("response used %d input (%d cached), %d output tokens",
		u.InputTokens, u.CachedInputTokens, u.OutputTokens), true
}

// commandLine renders a command given as a list of arguments or a string.
func commandLine(raw json.RawMessage) string {
	var args []string
	if json.Unmarshal(raw, &args) == nil {
		return strings.Join(args, " ")
	}
	return clip(rawText(raw), maxEventText)
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
