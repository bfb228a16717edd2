package agentcmd

import (
	"context"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// The format's permission profile, as the CLI gets it: unsandboxed, the
// CLI's own rules grant the work (edits, git, the gates, the result
// file); inside the OS sandbox its prompts are off; with a command of the
// host's, or PermissionsNone, nothing is added.
func TestPermissionProfiles(t *testing.T) {
	result := filepath.Join(t.TempDir(), "result")
	req := phases.AgentRequest{TaskPrompt: "p", Writable: []string{result},
		Constraints: phases.AgentConstraints{Commands: []string{"go  vet ./...", "sh -c 'rm -rf /'", "make test"}}}
	tests := []struct {
		name string
		cfg  Config
		want []string
	}{
		{"claude unsandboxed", Config{Format: FormatClaude, Sandbox: Sandbox{Mode: SandboxOff}}, []string{
			"-p", "--output-format", "stream-json", "--verbose", "--permission-mode=acceptEdits", "--add-dir=" + result,
			"--allowedTools=Bash(git status:*),Bash(git diff:*),Bash(git log:*),Bash(git show:*),Bash(git add:*),Bash(git rm:*)," +
				"Bash(git mv:*),Bash(git restore:*),Bash(git commit:*),Bash(go vet ./...:*),Bash(make test:*)"}},
		{"codex unsandboxed, not in a repository", Config{Format: FormatCodex, Sandbox: Sandbox{Mode: SandboxOff}}, []string{
			"exec", "--json", "--sandbox", "workspace-write", "-c", `approval_policy="never"`, "--add-dir", result, "-"}},
		{"claude with the host's command", Config{Format: FormatClaude, Argv: []string{"claude", "-p"}, Sandbox: Sandbox{Mode: SandboxOff}},
			[]string{"-p"}},
		{"claude with the host's command and the profile", Config{Format: FormatClaude, Argv: []string{"claude", "-p"},
			Permissions: PermissionsProfile, Sandbox: Sandbox{Mode: SandboxOff}},
			[]string{"-p", "--permission-mode=acceptEdits", "--add-dir=" + result, "--allowedTools=" + "Bash(git status:*),Bash(git diff:*),Bash(git log:*),Bash(git show:*),Bash(git add:*),Bash(git rm:*),Bash(git mv:*),Bash(git restore:*),Bash(git commit:*),Bash(go vet ./...:*),Bash(make test:*)"}},
		{"claude, none", Config{Format: FormatClaude, Permissions: PermissionsNone, Sandbox: Sandbox{Mode: SandboxOff}},
			[]string{"-p", "--output-format", "stream-json", "--verbose"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			name := "claude"
			if tt.cfg.Format == FormatCodex {
				name = "codex"
			}
			ws := mcpAgent(t, name)
			r := req
			r.WorkspacePath = ws
			_, err := New(tt.cfg).Execute(context.Background(), r, nil)
			require.NoError(t, err)
			assert.Equal(t, tt.want, readArgs(t, ws))
		})
	}
}

// Inside the sandbox the CLIs' own prompts are off (the sandbox is the
// boundary), and Claude Code is told it is in one.
func TestPermissionProfilesInTheSandbox(t *testing.T) {
	if _, err := exec.LookPath("bwrap"); err != nil {
		t.Skip("no bubblewrap") // CI installs it: sandbox_test.go's tests fail there without it
	}
	d := New(Config{Format: FormatClaude})
	if !d.Sandboxed() {
		t.Skip("bubblewrap cannot make namespaces here: " + d.Containment())
	}
	assert.Equal(t, []string{"--permission-mode=bypassPermissions"}, d.profileArgs(phases.AgentRequest{Writable: []string{"/x"}}, true))
	assert.Equal(t, []string{"--dangerously-bypass-approvals-and-sandbox"},
		New(Config{Format: FormatCodex}).profileArgs(phases.AgentRequest{}, true))
}
