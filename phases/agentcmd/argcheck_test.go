package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

func TestPlaceholdersInsideScriptsAreRefused(t *testing.T) {
	tests := []struct {
		name string
		argv []string
		bad  string // the placeholder refused; "" for none
	}{
		{"sh -c pasting the prompt", []string{"sh", "-c", "claude -p {prompt}"}, "{prompt}"},
		{"bash -lc", []string{"/bin/bash", "-lc", "agent '{task}'"}, "{task}"},
		{"bash -o pipefail -c", []string{"bash", "-o", "pipefail", "-c", "agent --session {session}"}, "{session}"},
		{"env before the shell", []string{"env", "A=1", "sh", "-c", "cd {workspace} && agent"}, "{workspace}"},
		{"after --", []string{"sh", "-c", "--", "agent {feedback}"}, "{feedback}"},
		{"python -c", []string{"python3", "-c", "print('{prompt}')"}, "{prompt}"},
		{"node --eval=", []string{"node", "--eval=run(`{prompt}`)"}, "{prompt}"},
		{"busybox sh -c", []string{"busybox", "sh", "-c", "agent {prompt}"}, "{prompt}"},
		{"positional arguments after the script are safe", []string{"sh", "-c", `agent "$1"`, "sh", "{prompt}"}, ""},
		{"a shell running a file", []string{"sh", "./agent.sh", "{prompt}"}, ""},
		{"an ordinary command", []string{"claude", "-p", "{prompt}"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := checkScriptPlaceholders(tt.argv)
			if tt.bad == "" {
				assert.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, ErrPromptInScript)
			var pe *ScriptPlaceholderError
			require.ErrorAs(t, err, &pe)
			assert.Equal(t, tt.bad, pe.Placeholder)
		})
	}
}

// The prompt a story's author wrote never runs as shell code: the driver
// refuses the command before anything starts.
func TestExecuteRefusesAPromptPastedIntoAShellScript(t *testing.T) {
	ws := t.TempDir()
	_, err := New(Config{Argv: []string{"sh", "-c", "echo {prompt}"}}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "$(touch pwned)"}, nil)
	require.ErrorIs(t, err, ErrPromptInScript)
	assert.NoFileExists(t, filepath.Join(ws, "pwned"))
}

func TestSessionIDsAreChecked(t *testing.T) {
	tests := []struct {
		format Format
		id     string
		ok     bool
	}{
		{FormatClaude, "3f2c9a1e-7b4d-4e21-9c55-0a8d6e2b1f47", true},
		{FormatClaude, "--dangerously-skip-permissions", false},
		{FormatClaude, "sess-1", false},
		{FormatCodex, "0199a213-81c0-7800-8aa1-bbab2a035a53", true},
		{FormatCodex, "0199a213-81c0-7800-8aa1-bbab2a035a53 --yolo", false},
		{FormatText, "s-9.a:b", true},
		{FormatText, "-x", false},
		{FormatText, strings.Repeat("a", 129), false},
		{FormatText, "a b", false},
	}
	for _, tt := range tests {
		err := checkSessionID(tt.format, tt.id)
		if tt.ok {
			assert.NoError(t, err, tt.id)
		} else {
			assert.ErrorIs(t, err, ErrInvalidSessionID, tt.id)
		}
	}
}

func TestAnInvalidSessionIDIsNeverResumed(t *testing.T) {
	ws := fakeAgent(t, "claude", "claude_success.jsonl", 0)
	_, err := New(Config{Format: FormatClaude}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "x", SessionID: "-p"}, nil)
	var se *SessionIDError
	require.ErrorAs(t, err, &se)
	assert.NoFileExists(t, filepath.Join(ws, "args.txt"), "nothing ran")

	// One read from an agent's output is dropped: the next run starts afresh.
	agent := writeScript(t, t.TempDir(), "agent", `echo '{"type":"system","subtype":"init","session_id":"--resume-me"}'`+"\n")
	res, err := New(Config{Format: FormatClaude, Argv: []string{agent}}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "x"}, nil)
	require.NoError(t, err)
	assert.Empty(t, res.SessionID)
}

// A 200 KB prompt: Claude Code and Codex take it on stdin whatever
// PromptVia says when it is appended; a prompt placed in an argument by a
// placeholder is a typed error, not E2BIG.
func TestLongPrompts(t *testing.T) {
	long := strings.Repeat("x", 200<<10)
	ws := fakeAgent(t, "claude", "claude_success.jsonl", 0)
	res, err := New(Config{Format: FormatClaude, PromptVia: PromptArg, Permissions: PermissionsNone}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: ws, TaskPrompt: long}, nil)
	require.NoError(t, err)
	assert.True(t, res.Success)
	assert.Equal(t, []string{"-p", "--output-format", "stream-json", "--verbose"}, readArgs(t, ws))
	assert.Equal(t, long, readStdin(t, ws))

	for _, cfg := range []Config{
		{Argv: []string{"claude", "-p", "{prompt}"}, Format: FormatClaude},
		{Argv: []string{"agent"}},
	} {
		_, err = New(cfg).Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: long}, nil)
		var pe *PromptTooLongError
		require.ErrorAs(t, err, &pe)
		assert.ErrorIs(t, err, ErrPromptTooLong)
		assert.Equal(t, MaxArgLen, pe.Limit)
	}

	// On stdin any size goes.
	agent := writeScript(t, t.TempDir(), "agent", "wc -c\n")
	res, err = New(Config{Argv: []string{agent}, PromptVia: PromptStdin}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: long}, nil)
	require.NoError(t, err)
	assert.Equal(t, "204800", strings.TrimSpace(res.Output))
	_ = os.Remove(filepath.Join(ws, "args.txt"))
}
