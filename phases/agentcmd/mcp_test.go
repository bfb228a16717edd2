package agentcmd

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// mcpAgent installs a fake `name` CLI in PATH that records its arguments,
// the MCP configuration file it was given (which the driver removes after
// the run) and the token variable Codex would read.
func mcpAgent(t *testing.T, name string) (ws string) {
	t.Helper()
	bin := t.TempDir()
	writeScript(t, bin, name, `
ws=$FOREMAN_WORKSPACE
for a in "$@"; do
  printf '%s\n' "$a" >> "$ws/args.txt"
  case "$a" in --mcp-config=*) cat "${a#--mcp-config=}" > "$ws/mcp-config.json"; ls -l "${a#--mcp-config=}" | cut -c1-10 > "$ws/mode";; esac
done
printf '%s' "${FOREMAN_MCP_TOKEN:-unset}" > "$ws/token"
`)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	return t.TempDir()
}

var reportServer = phases.MCPServer{Name: "foreman", URL: "http://127.0.0.1:4321/mcp", BearerToken: "s3cret",
	BearerTokenEnv: "FOREMAN_MCP_TOKEN", Tools: []string{"report", "status"}}

func TestClaudeCodeGetsTheServersThroughMCPConfig(t *testing.T) {
	ws := mcpAgent(t, "claude")
	req := phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "build it", MCPServers: []phases.MCPServer{reportServer},
		Constraints: phases.AgentConstraints{AllowedTools: []string{"Edit"}}}
	// The prompt in argv: the case where a multi-value flag could take it.
	_, err := New(Config{Format: FormatClaude, PromptVia: PromptArg, Permissions: PermissionsNone}).Execute(context.Background(), req, nil)
	require.NoError(t, err)

	args := readArgs(t, ws)
	require.Len(t, args, 7)
	assert.Equal(t, []string{"-p", "--output-format", "stream-json", "--verbose",
		"--allowedTools=Edit,mcp__foreman__report,mcp__foreman__status"}, args[:5])
	require.True(t, strings.HasPrefix(args[5], "--mcp-config="), args[5])
	assert.Equal(t, "build it", args[6], "the prompt stays an argument of its own, after the one-value flags")
	var cfg map[string]any
	data, err := os.ReadFile(filepath.Join(ws, "mcp-config.json"))
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(data, &cfg))
	assert.Equal(t, map[string]any{"mcpServers": map[string]any{"foreman": map[string]any{
		"type": "http", "url": "http://127.0.0.1:4321/mcp", "headers": map[string]any{"Authorization": "Bearer s3cret"}}}}, cfg)
	mode, err := os.ReadFile(filepath.Join(ws, "mode"))
	require.NoError(t, err)
	assert.Equal(t, "-rw-------", strings.TrimSpace(string(mode)), "the token is readable by its owner only")
	assert.NoFileExists(t, strings.TrimPrefix(args[5], "--mcp-config="), "the file goes with the run")
	assert.Equal(t, "unset", readFile(t, ws, "token"), "Claude Code reads the token from the file, not the environment")
}

func TestCodexGetsTheServersThroughConfigOverrides(t *testing.T) {
	ws := mcpAgent(t, "codex")
	const session = "0199a213-81c0-7800-8aa1-bbab2a035a53"
	req := phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "build it", SessionID: session, MCPServers: []phases.MCPServer{reportServer}}
	_, err := New(Config{Format: FormatCodex, Permissions: PermissionsNone}).Execute(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"exec", "--json",
		"-c", `mcp_servers.foreman.url="http://127.0.0.1:4321/mcp"`,
		"-c", `mcp_servers.foreman.default_tools_approval_mode="approve"`,
		"-c", `mcp_servers.foreman.enabled_tools=["report","status"]`,
		"-c", `mcp_servers.foreman.bearer_token_env_var="FOREMAN_MCP_TOKEN"`,
		"resume", session, "-"}, readArgs(t, ws))
	assert.Equal(t, "s3cret", readFile(t, ws, "token"))
}

func TestATextAgentIgnoresMCPServers(t *testing.T) {
	ws := mcpAgent(t, "agent")
	_, err := New(Config{Argv: []string{"agent", "{prompt}"}}).Execute(context.Background(),
		phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "p", MCPServers: []phases.MCPServer{reportServer}}, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"p"}, readArgs(t, ws))
}

func TestAnUnusableMCPServerIsAnError(t *testing.T) {
	for name, s := range map[string]phases.MCPServer{
		"name with a dot": {Name: "a.b", URL: "http://x"},
		"empty name":      {URL: "http://x"},
		"no URL":          {Name: "foreman"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := New(Config{Format: FormatClaude}).Execute(context.Background(),
				phases.AgentRequest{WorkspacePath: t.TempDir(), TaskPrompt: "p", MCPServers: []phases.MCPServer{s}}, nil)
			assert.ErrorIs(t, err, ErrMCPServer)
		})
	}
}

func readFile(t *testing.T, dir, name string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, name))
	require.NoError(t, err)
	return string(b)
}

func TestGeminiGetsTheServersThroughASettingsFile(t *testing.T) {
	bin := t.TempDir()
	writeScript(t, bin, "gemini", `
ws=$FOREMAN_WORKSPACE
for a in "$@"; do printf '%s\n' "$a" >> "$ws/args.txt"; done
cat "$`+GeminiSettingsEnv+`" > "$ws/settings.json"
ls -l "$`+GeminiSettingsEnv+`" | cut -c1-10 > "$ws/mode"
printf '%s' "$`+GeminiSettingsEnv+`" > "$ws/path"
cat > "$ws/stdin"
`)
	t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
	ws, results := t.TempDir(), t.TempDir()
	const session = "8d2cae7b-b3d6-4410-8f5c-2400b43cf484"
	req := phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "build it", SessionID: session, Writable: []string{results},
		MCPServers: []phases.MCPServer{reportServer}, Constraints: phases.AgentConstraints{Model: "gemini-2.5-pro"}}
	_, err := New(Config{Format: FormatGemini, Sandbox: Sandbox{Mode: SandboxOff}}).Execute(context.Background(), req, nil)
	require.NoError(t, err)
	assert.Equal(t, []string{"--output-format", "stream-json", "--skip-trust", "--approval-mode", "yolo",
		"--model", "gemini-2.5-pro", "--include-directories=" + results, "--resume", session}, readArgs(t, ws))
	assert.Equal(t, "build it", readFile(t, ws, "stdin"), "the prompt on stdin")
	var cfg map[string]any
	require.NoError(t, json.Unmarshal([]byte(readFile(t, ws, "settings.json")), &cfg))
	assert.Equal(t, map[string]any{"mcpServers": map[string]any{"foreman": map[string]any{
		"httpUrl": "http://127.0.0.1:4321/mcp", "headers": map[string]any{"Authorization": "Bearer s3cret"}, "trust": true}}}, cfg)
	assert.Equal(t, "-rw-------", strings.TrimSpace(readFile(t, ws, "mode")))
	path := readFile(t, ws, "path")
	assert.False(t, strings.HasPrefix(path, os.TempDir()), "Gemini CLI skips a system settings file under a world-writable directory: %s", path)
	assert.NoFileExists(t, path, "the file goes with the run")
}
