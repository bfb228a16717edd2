package agentcmd

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentforeman/foreman/phases"
)

// GeminiSettingsEnv names the environment variable through which the
// driver gives Gemini CLI a settings file of its own: Gemini CLI reads it
// as its system settings (GEMINI_CLI_SYSTEM_SETTINGS_PATH), which win over
// the user's and the workspace's, in place of /etc/gemini-cli/settings.json.
const GeminiSettingsEnv = "GEMINI_CLI_SYSTEM_SETTINGS_PATH"

// GeminiArgs is FormatGemini's default command: gemini --output-format
// stream-json --skip-trust --approval-mode yolo. Gemini CLI 0.61 reads its
// prompt from stdin when stdin is not a terminal (no -p needed).
// --skip-trust trusts the workspace for the run (a headless run in an
// untrusted folder refuses to start, and would fall back to the default
// approval mode). In a headless run the default approval mode offers no tool
// that edits or runs anything (no write_file, replace, run_shell_command);
// auto_edit adds the editing tools only; yolo offers every tool and runs
// them without asking, the OS sandbox (Config.Sandbox) being what contains
// them. A host narrows it with its own Argv: --approval-mode auto_edit, or
// Gemini CLI's --policy files (its policy engine allows or denies each tool
// and shell command). The slice is new on every call.
func GeminiArgs() []string {
	return []string{"gemini", "--output-format", "stream-json", "--skip-trust", "--approval-mode", "yolo"}
}

// geminiIncludeArgs are --include-directories arguments for the paths
// outside the workspace the agent must write (AgentRequest.Writable):
// Gemini CLI's file tools refuse any path outside its workspace
// directories ("Path not in workspace"), even in yolo mode. The "="
// form keeps the option (an array) from taking what follows.
func geminiIncludeArgs(writable []string) []string {
	var args []string
	for _, w := range writable {
		if w != "" {
			args = append(args, "--include-directories="+w)
		}
	}
	return args
}

// geminiSettingsDir makes a private directory for the settings file.
// Gemini CLI skips a system settings file when any directory above it is
// writable by group or others (as /tmp is), so the directory is made under
// the user's cache directory, mode 0700.
func geminiSettingsDir() (string, error) {
	base, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("agentcmd: gemini settings: %w", err)
	}
	base = filepath.Join(base, "foreman-gemini")
	if err := os.MkdirAll(base, 0o700); err != nil {
		return "", fmt.Errorf("agentcmd: gemini settings: %w", err)
	}
	dir, err := os.MkdirTemp(base, "mcp-")
	if err != nil {
		return "", fmt.Errorf("agentcmd: gemini settings: %w", err)
	}
	return dir, nil
}

// geminiMCPSettings writes the servers as Gemini CLI settings in dir and
// returns the environment entry that loads them (GeminiSettingsEnv). The
// format is settings.json's "mcpServers": an entry per server with
// "httpUrl" (a streamable HTTP server), "headers" carrying the bearer
// token, and "trust": true, so that its tools run without asking and are
// offered even in the default approval mode (Gemini CLI names them
// mcp_<server>_<tool>). The file, readable by its owner only, keeps the
// token out of the process list and the environment. Nothing is written to
// the user's ~/.gemini.
func geminiMCPSettings(servers []phases.MCPServer, dir string) ([]string, error) {
	type server struct {
		HTTPURL string            `json:"httpUrl"`
		Headers map[string]string `json:"headers,omitempty"`
		Trust   bool              `json:"trust"`
	}
	cfg := struct {
		MCPServers map[string]server `json:"mcpServers"`
	}{MCPServers: map[string]server{}}
	for _, s := range servers {
		e := server{HTTPURL: s.URL, Trust: true}
		if s.BearerToken != "" {
			e.Headers = map[string]string{"Authorization": "Bearer " + s.BearerToken}
		}
		cfg.MCPServers[s.Name] = e
	}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "settings.json")
	if err := os.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return nil, err
	}
	return []string{GeminiSettingsEnv + "=" + path}, nil
}
