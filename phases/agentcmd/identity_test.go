package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// identityVars are git's identity variables, which the tests unset on the
// host unless a case sets them.
var identityVars = []string{"GIT_AUTHOR_NAME", "GIT_AUTHOR_EMAIL", "GIT_COMMITTER_NAME", "GIT_COMMITTER_EMAIL"}

// unsetIdentity clears git's identity variables in this process for the
// test (t.Setenv restores them after it).
func unsetIdentity(t *testing.T) {
	t.Helper()
	for _, k := range identityVars {
		t.Setenv(k, "")
		require.NoError(t, os.Unsetenv(k))
	}
}

// A sandboxed agent commits in its worktree with no identity variable set
// anywhere: its git cannot read the host's ~/.gitconfig (the host's home is
// hidden), so the driver gives it the identity the host's git has in the
// workspace, else a fixed one; a host's own choice (Config.Env, the host's
// environment, the request's Env) wins.
func TestASandboxedAgentHasAGitIdentity(t *testing.T) {
	requireSandbox(t)
	tests := []struct {
		name string
		// global is the host's ~/.gitconfig; local is git config the test
		// sets in the repository (the host's repo-local config).
		global, local map[string]string
		hostEnv       map[string]string
		cfgEnv        []string
		reqEnv        []string
		author        string // the commit's "%an <%ae>"
		committer     string // "%cn <%ce>"
	}{
		{
			name:      "no identity anywhere: the fallback",
			author:    FallbackGitName + " <" + FallbackGitEmail + ">",
			committer: FallbackGitName + " <" + FallbackGitEmail + ">",
		},
		{
			name:      "the host's global identity, which the sandbox hides",
			global:    map[string]string{"user.name": "Host Person", "user.email": "host@example.com"},
			author:    "Host Person <host@example.com>",
			committer: "Host Person <host@example.com>",
		},
		{
			name:      "the repository's own user.name over the global one",
			global:    map[string]string{"user.name": "Host Person", "user.email": "host@example.com"},
			local:     map[string]string{"user.name": "Repo Person"},
			author:    "Repo Person <host@example.com>",
			committer: "Repo Person <host@example.com>",
		},
		{
			name:      "a name without an email: the fallback email",
			global:    map[string]string{"user.name": "Host Person"},
			author:    "Host Person <" + FallbackGitEmail + ">",
			committer: "Host Person <" + FallbackGitEmail + ">",
		},
		{
			name:   "Config.Env wins",
			global: map[string]string{"user.name": "Host Person", "user.email": "host@example.com"},
			cfgEnv: []string{"GIT_AUTHOR_NAME=Explicit", "GIT_AUTHOR_EMAIL=explicit@example.com",
				"GIT_COMMITTER_NAME=Explicit", "GIT_COMMITTER_EMAIL=explicit@example.com"},
			author:    "Explicit <explicit@example.com>",
			committer: "Explicit <explicit@example.com>",
		},
		{
			name:      "the host's environment wins, variable by variable",
			global:    map[string]string{"user.name": "Host Person", "user.email": "host@example.com"},
			hostEnv:   map[string]string{"GIT_COMMITTER_NAME": "Host Bot", "GIT_COMMITTER_EMAIL": "bot@example.com"},
			author:    "Host Person <host@example.com>",
			committer: "Host Bot <bot@example.com>",
		},
		{
			name:      "the request's Env wins",
			reqEnv:    []string{"GIT_AUTHOR_NAME=Requested"},
			author:    "Requested <" + FallbackGitEmail + ">",
			committer: FallbackGitName + " <" + FallbackGitEmail + ">",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			unsetIdentity(t)
			l := newTeamLayout(t)
			hostHome := t.TempDir()
			t.Setenv("HOME", hostHome)
			t.Setenv("GIT_CONFIG_GLOBAL", "")
			require.NoError(t, os.Unsetenv("GIT_CONFIG_GLOBAL"))
			t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
			for k, v := range tt.global {
				gitOut(t, l.repo, "config", "--file", filepath.Join(hostHome, ".gitconfig"), k, v)
			}
			for k, v := range tt.local {
				gitOut(t, l.repo, "config", k, v)
			}
			for k, v := range tt.hostEnv {
				t.Setenv(k, v)
			}
			agent := writeScript(t, t.TempDir(), "agent", `echo work > work.txt && git add work.txt && git commit -q -m work && echo committed`)
			d := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Env: tt.cfgEnv, Sandbox: Sandbox{Mode: SandboxRequired}})
			res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA, Env: tt.reqEnv}, nil)
			require.NoError(t, err)
			require.True(t, res.Success, "the agent could not commit: %s", res.Stderr)
			assert.Equal(t, tt.author, gitOut(t, l.repo, "log", "-1", "--format=%an <%ae>", "foreman/A"))
			assert.Equal(t, tt.committer, gitOut(t, l.repo, "log", "-1", "--format=%cn <%ce>", "foreman/A"))
		})
	}
}

// An agent that follows git's hint and sets an identity in the repository
// (git config user.email, no --global) is never led to: it already has
// one, so no such write shows as a refusal.
func TestASandboxedAgentIsNotLedToWriteTheRepositorysConfig(t *testing.T) {
	requireSandbox(t)
	unsetIdentity(t)
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_GLOBAL", os.DevNull)
	l := newTeamLayout(t)
	// What an agent does: commit, and only when git asks, configure.
	agent := writeScript(t, t.TempDir(), "agent", `echo work > work.txt && git add work.txt
git commit -q -m work 2>/dev/null || { git config user.email a@b.c; git config user.name A; git commit -q -m work; }`)
	rec := &recorder{}
	d := New(Config{Argv: []string{agent}, LeaseDir: l.leases, Sandbox: Sandbox{Mode: SandboxRequired}})
	res, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
	require.NoError(t, err)
	require.True(t, res.Success, res.Stderr)
	assert.Empty(t, rec.lines(phases.StreamSandbox), "no sandbox note")
	assert.Equal(t, FallbackGitName, gitOut(t, l.repo, "log", "-1", "--format=%an", "foreman/A"))
}

// Unsandboxed, the agent's git reads the host's own configuration: the
// driver adds no identity.
func TestAnUnsandboxedAgentGetsNoIdentityVariables(t *testing.T) {
	unsetIdentity(t)
	env := envOf(t, Config{Sandbox: Sandbox{Mode: SandboxOff}}, phases.AgentRequest{})
	for _, k := range identityVars {
		assert.NotContains(t, env, k)
	}
	requireSandbox(t)
	env = envOf(t, Config{Sandbox: Sandbox{Mode: SandboxRequired}}, phases.AgentRequest{})
	for _, k := range identityVars {
		assert.Contains(t, env, k)
	}
}
