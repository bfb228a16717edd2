package agentcmd

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases"
)

// TestTheHostsForgeTokenReachesNoAgent: GITHUB_TOKEN and GH_TOKEN in the
// host's environment are left out of an agent's, even when PassEnv names
// them; one the host gives in Config.Env on purpose is kept.
func TestTheHostsForgeTokenReachesNoAgent(t *testing.T) {
	t.Setenv("GITHUB_TOKEN", "ghp_host")
	t.Setenv("GH_TOKEN", "gho_host")
	env := New(Config{Argv: []string{"true"}, PassEnv: []string{"GITHUB_TOKEN", "GH_*"}}).environ(phases.AgentRequest{}, nil, "")
	assert.NotContains(t, env, "GITHUB_TOKEN=ghp_host")
	assert.NotContains(t, env, "GH_TOKEN=gho_host")

	env = New(Config{Argv: []string{"true"}, Env: []string{"GH_TOKEN=given"}}).environ(phases.AgentRequest{}, nil, "")
	assert.Contains(t, env, "GH_TOKEN=given")
}
