package agentcmd

import (
	"context"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// envOf runs `env` as the agent and returns what it printed, as a map.
func envOf(t *testing.T, cfg Config, req phases.AgentRequest) map[string]string {
	t.Helper()
	cfg.Argv = []string{"sh", "-c", "env", "sh"} // arguments after it (codex's "-") are ignored
	cfg.PromptVia, cfg.ResumeArgs = PromptStdin, []string{}
	req.WorkspacePath = t.TempDir()
	res, err := New(cfg).Execute(context.Background(), req, nil)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	m := map[string]string{}
	for _, l := range strings.Split(strings.TrimSpace(res.Output), "\n") {
		if k, v, ok := strings.Cut(l, "="); ok {
			m[k] = v
		}
	}
	return m
}

func TestTheAgentsEnvironmentIsBuiltNotInherited(t *testing.T) {
	t.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	t.Setenv("DATABASE_URL", "postgres://u:pw@127.0.0.1/x")
	t.Setenv("FOREMAN_HOST_SETTING", "host")
	t.Setenv("FOREMAN_GIT_OWNER", "1.2")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant")
	t.Setenv("OPENAI_API_KEY", "sk-openai")
	t.Setenv("AWS_SECRET_ACCESS_KEY", "aws")
	t.Setenv("LC_ALL", "C.UTF-8")
	t.Setenv("GIT_DIR", "/elsewhere")
	tests := []struct {
		name       string
		cfg        Config
		has, hasNo []string
	}{
		{
			name:  "claude gets its own API variables and the basics",
			cfg:   Config{Format: FormatClaude},
			has:   []string{"PATH", "LC_ALL", "ANTHROPIC_API_KEY", "FOREMAN_WORKSPACE", "FOREMAN_ITERATION", "FOREMAN_SESSION_ID", AgentOwnerEnv},
			hasNo: []string{"OPENAI_API_KEY", "FOREMAN_NOTIFY_SECRET", "DATABASE_URL", "FOREMAN_HOST_SETTING", "FOREMAN_GIT_OWNER", "AWS_SECRET_ACCESS_KEY", "GIT_DIR"},
		},
		{
			name:  "codex gets its own",
			cfg:   Config{Format: FormatCodex},
			has:   []string{"OPENAI_API_KEY"},
			hasNo: []string{"ANTHROPIC_API_KEY"},
		},
		{
			name:  "a text agent's CLI is unknown: every CLI's",
			cfg:   Config{},
			has:   []string{"OPENAI_API_KEY", "ANTHROPIC_API_KEY"},
			hasNo: []string{"FOREMAN_NOTIFY_SECRET", "DATABASE_URL"},
		},
		{
			name:  "the host passes more, never the team's secrets",
			cfg:   Config{PassEnv: []string{"AWS_*", "FOREMAN_*", "DATABASE_URL"}},
			has:   []string{"AWS_SECRET_ACCESS_KEY", "FOREMAN_HOST_SETTING"},
			hasNo: []string{"FOREMAN_NOTIFY_SECRET", "DATABASE_URL", "FOREMAN_GIT_OWNER"},
		},
		{
			name:  "the host withholds more",
			cfg:   Config{SecretEnv: []string{"ANTHROPIC_*"}},
			has:   []string{"OPENAI_API_KEY"},
			hasNo: []string{"ANTHROPIC_API_KEY"},
		},
		{
			name: "Config.Env hands a value over explicitly",
			cfg:  Config{Env: []string{"DATABASE_URL=postgres://agent-db"}},
			has:  []string{"DATABASE_URL"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := envOf(t, tt.cfg, phases.AgentRequest{SessionID: "0199a213-81c0-7800-8aa1-bbab2a035a53"})
			for _, k := range tt.has {
				assert.Contains(t, env, k)
			}
			for _, k := range tt.hasNo {
				assert.NotContains(t, env, k)
			}
		})
	}
	assert.Equal(t, "postgres://agent-db", envOf(t, Config{Env: []string{"DATABASE_URL=postgres://agent-db"}}, phases.AgentRequest{})["DATABASE_URL"])
}

// In a sandbox the agent's HOME and TMPDIR are its own and IS_SANDBOX is
// set; unsandboxed it keeps the host's HOME.
func TestTheSandboxSetsHomeAndIsSandbox(t *testing.T) {
	hostHome := t.TempDir()
	t.Setenv("HOME", hostHome)
	off := envOf(t, Config{Sandbox: Sandbox{Mode: SandboxOff}}, phases.AgentRequest{})
	assert.Equal(t, hostHome, off["HOME"])
	assert.NotContains(t, off, "IS_SANDBOX")

	requireSandbox(t)
	on := envOf(t, Config{Sandbox: Sandbox{Mode: SandboxRequired}}, phases.AgentRequest{})
	assert.Equal(t, "1", on["IS_SANDBOX"])
	assert.Equal(t, "/tmp", on["TMPDIR"])
	assert.Equal(t, sandboxHome, on["HOME"], "a home of its own, at a path that names nothing of the host's")
}

func TestLeasesKeepNoSecrets(t *testing.T) {
	env := foremanEnv([]string{"FOREMAN_ASSIGNMENT=A-a1", "FOREMAN_MCP_TOKEN=t0k", "FOREMAN_MCP_TOKEN_foreman=t1", "FOREMAN_NOTIFY_SECRET=s", "PATH=/bin"})
	assert.Equal(t, map[string]string{"FOREMAN_ASSIGNMENT": "A-a1"}, env)
}
