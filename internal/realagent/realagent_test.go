package realagent_test

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/realagent"
)

// recorder is a testing.TB that records Fatalf and Skipf instead of ending
// the test.
type recorder struct {
	testing.TB
	fatal, skip string
}

func (r *recorder) Helper()                        {}
func (r *recorder) Fatalf(f string, a ...any)      { r.fatal = fmt.Sprintf(f, a...) }
func (r *recorder) Skipf(f string, a ...any)       { r.skip = fmt.Sprintf(f, a...) }
func (r *recorder) Cleanup(f func())               { r.TB.Cleanup(f) }
func (r *recorder) TempDir() string                { return r.TB.TempDir() }
func (r *recorder) Logf(format string, a ...any)   { r.TB.Logf(format, a...) }
func (r *recorder) Errorf(format string, a ...any) { r.TB.Errorf(format, a...) }

func TestPathAndRequire(t *testing.T) {
	dir := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(dir, "claude"), []byte("#!/bin/sh\n"), 0o755))
	require.NoError(t, os.WriteFile(filepath.Join(dir, "codex"), []byte("not executable"), 0o644))
	t.Setenv(realagent.BinEnv, dir)

	p, err := realagent.Path(realagent.Claude)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(dir, "claude"), p)
	_, err = realagent.Path(realagent.Codex)
	require.ErrorIs(t, err, realagent.ErrMissing)

	for _, tc := range []struct {
		ci          string
		fatal, skip bool
	}{{"", false, true}, {"false", false, true}, {"true", true, false}} {
		t.Run("CI="+tc.ci, func(t *testing.T) {
			t.Setenv("CI", tc.ci)
			r := &recorder{TB: t}
			assert.Empty(t, realagent.Require(r, realagent.Codex))
			assert.Equal(t, tc.fatal, r.fatal != "", "fatal: %q", r.fatal)
			assert.Equal(t, tc.skip, r.skip != "", "skip: %q", r.skip)
			r = &recorder{TB: t}
			assert.Equal(t, p, realagent.Require(r, realagent.Claude))
			assert.Empty(t, r.fatal+r.skip)
		})
	}
}

func TestDirDefaultsToTheModuleRoot(t *testing.T) {
	t.Setenv(realagent.BinEnv, "")
	root, err := realagent.ModuleRoot()
	require.NoError(t, err)
	assert.FileExists(t, filepath.Join(root, ".ci", "agents", "package.json"))
	dir, err := realagent.Dir()
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, ".ci", "agents", "node_modules", ".bin"), dir)
}

func TestClaudeEnv(t *testing.T) {
	t.Setenv("ANTHROPIC_API_KEY", "the-callers-real-key")
	env := realagent.ClaudeEnv("http://127.0.0.1:1234", "/h")
	assert.Contains(t, env, "ANTHROPIC_BASE_URL=http://127.0.0.1:1234")
	assert.Contains(t, env, "ANTHROPIC_API_KEY="+realagent.APIKey)
	assert.Contains(t, env, "HOME=/h")
	assert.Contains(t, env, "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1")
	assert.NotContains(t, env, "ANTHROPIC_API_KEY=the-callers-real-key")
}

func TestCodexEnv(t *testing.T) {
	_, err := realagent.CodexEnv("http://127.0.0.1:1", "/tmp/codex-home")
	require.Error(t, err, "CODEX_HOME under /tmp breaks Codex's sandbox")

	home := realagent.CodexHome(t)
	assert.False(t, strings.HasPrefix(home, "/tmp/"), home)
	env, err := realagent.CodexEnv("http://127.0.0.1:1234/", home)
	require.NoError(t, err)
	assert.Contains(t, env, "CODEX_HOME="+home)
	assert.Contains(t, env, "OPENAI_API_KEY="+realagent.APIKey)
	toml, err := os.ReadFile(filepath.Join(home, "config.toml"))
	require.NoError(t, err)
	assert.Contains(t, string(toml), `model_provider = "modeltest"`)
	assert.Contains(t, string(toml), `base_url = "http://127.0.0.1:1234/v1"`)
	assert.Contains(t, string(toml), `wire_api = "responses"`)
}

func TestGeminiEnv(t *testing.T) {
	t.Setenv("GEMINI_API_KEY", "the-callers-real-key")
	home := t.TempDir()
	env, err := realagent.GeminiEnv("http://127.0.0.1:1234/", home, map[string]any{"mcpServers": map[string]any{"x": map[string]any{"httpUrl": "u"}}})
	require.NoError(t, err)
	assert.Contains(t, env, "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:1234")
	assert.Contains(t, env, "GEMINI_API_KEY="+realagent.APIKey)
	assert.Contains(t, env, "GEMINI_CLI_TRUST_WORKSPACE=true")
	assert.Contains(t, env, "HOME="+home)
	assert.NotContains(t, env, "GEMINI_API_KEY=the-callers-real-key")
	data, err := os.ReadFile(filepath.Join(home, ".gemini", "settings.json"))
	require.NoError(t, err)
	var settings struct {
		Security struct {
			Auth struct {
				SelectedType string `json:"selectedType"`
			} `json:"auth"`
		} `json:"security"`
		MCPServers map[string]any `json:"mcpServers"`
	}
	require.NoError(t, json.Unmarshal(data, &settings))
	assert.Equal(t, "gemini-api-key", settings.Security.Auth.SelectedType)
	assert.Contains(t, settings.MCPServers, "x")
}
