package realagent

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// APIKey is the key the CLIs send to the scripted server.
const APIKey = "sk-modeltest"

// ProviderName is the Codex model provider CodexEnv configures.
const ProviderName = "modeltest"

// baseEnv is the part of the caller's environment the CLIs get; everything
// else (API keys, the caller's HOME and CLI settings) is left out.
func baseEnv() []string {
	var env []string
	for _, k := range []string{"PATH", "LANG", "LC_ALL", "TERM", "TZ", "USER", "LOGNAME", "SHELL", "TMPDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// ClaudeEnv is the environment for Claude Code talking to the model server
// at baseURL (its URL, no /v1), with HOME (where it keeps ~/.claude and its
// sessions) in home: ANTHROPIC_BASE_URL, ANTHROPIC_API_KEY,
// CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1 (no telemetry, update or
// feature-flag calls), DISABLE_AUTOUPDATER=1, and the caller's PATH, locale
// and TMPDIR; nothing else of the caller's environment.
func ClaudeEnv(baseURL, home string) []string {
	return append(baseEnv(),
		"HOME="+home,
		"ANTHROPIC_BASE_URL="+baseURL,
		"ANTHROPIC_API_KEY="+APIKey,
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
	)
}

// CodexEnv writes codexHome/config.toml selecting a model provider named
// ProviderName at baseURL+"/v1" (wire_api "responses", key from
// OPENAI_API_KEY) and returns the environment for Codex: HOME=codexHome,
// CODEX_HOME=codexHome, OPENAI_API_KEY, and the caller's PATH, locale and
// TMPDIR. codexHome must not be under /tmp: Codex's bubblewrap sandbox gives
// commands a private /tmp and then cannot find its own helper (CodexHome
// makes one elsewhere).
func CodexEnv(baseURL, codexHome string) ([]string, error) {
	if abs, err := filepath.Abs(codexHome); err == nil && (abs == "/tmp" || strings.HasPrefix(abs, "/tmp/")) {
		return nil, fmt.Errorf("realagent: CODEX_HOME %s is under /tmp, where Codex's sandbox cannot find its helper", abs)
	}
	if err := os.MkdirAll(codexHome, 0o700); err != nil {
		return nil, fmt.Errorf("realagent: CODEX_HOME: %w", err)
	}
	toml := fmt.Sprintf(`# Written by internal/realagent: Codex against a modeltest server.
model_provider = %[1]q

[model_providers.%[1]s]
name = "modeltest"
base_url = %[2]q
env_key = "OPENAI_API_KEY"
wire_api = "responses"
`, ProviderName, strings.TrimSuffix(baseURL, "/")+"/v1")
	if err := os.WriteFile(filepath.Join(codexHome, "config.toml"), []byte(toml), 0o600); err != nil {
		return nil, fmt.Errorf("realagent: write config.toml: %w", err)
	}
	return append(baseEnv(),
		"HOME="+codexHome,
		"CODEX_HOME="+codexHome,
		"OPENAI_API_KEY="+APIKey,
	), nil
}

// CodexHome makes a fresh directory for CODEX_HOME outside /tmp (under the
// user's cache directory) and removes it when the test ends.
func CodexHome(tb testing.TB) string {
	tb.Helper()
	base, err := os.UserCacheDir()
	if err != nil {
		base = os.Getenv("HOME")
	}
	base = filepath.Join(base, "foreman-realagent")
	if err := os.MkdirAll(base, 0o700); err != nil {
		tb.Fatalf("realagent: %v", err)
	}
	dir, err := os.MkdirTemp(base, "codex-")
	if err != nil {
		tb.Fatalf("realagent: %v", err)
	}
	tb.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// GeminiSettings is the user settings file GeminiEnv writes:
// ~/.gemini/settings.json selecting API-key authentication (without it
// Gemini CLI 0.61 asks how to sign in and exits in headless mode), with
// automatic updates and usage statistics off (nothing leaves the machine).
const GeminiSettings = `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
  "privacy": {"usageStatisticsEnabled": false}
}
`

// GeminiEnv writes home/.gemini/settings.json (GeminiSettings, merged with
// extra: top-level keys of extra replace the file's, such as "mcpServers")
// and returns the environment for Gemini CLI talking to the model server at
// baseURL (its URL, no path): GOOGLE_GEMINI_BASE_URL, GEMINI_API_KEY,
// GEMINI_CLI_TRUST_WORKSPACE=true (headless runs in an untrusted folder
// refuse to start), HOME=home, and the caller's PATH, locale and TMPDIR.
func GeminiEnv(baseURL, home string, extra map[string]any) ([]string, error) {
	var settings map[string]any
	if err := json.Unmarshal([]byte(GeminiSettings), &settings); err != nil {
		return nil, fmt.Errorf("realagent: %w", err)
	}
	for k, v := range extra {
		settings[k] = v
	}
	data, err := json.MarshalIndent(settings, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("realagent: gemini settings: %w", err)
	}
	dir := filepath.Join(home, ".gemini")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("realagent: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "settings.json"), append(data, '\n'), 0o600); err != nil {
		return nil, fmt.Errorf("realagent: write gemini settings: %w", err)
	}
	return append(baseEnv(),
		"HOME="+home,
		"GOOGLE_GEMINI_BASE_URL="+strings.TrimSuffix(baseURL, "/"),
		"GEMINI_API_KEY="+APIKey,
		"GEMINI_CLI_TRUST_WORKSPACE=true",
	), nil
}
