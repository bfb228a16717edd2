package agentcmd

import (
	"context"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// What an agent does to other branches in its private copy of the refs is
// not carried back (git itself cannot delete one there: packed-refs is
// read-only; rm can), and each is a StreamSandbox note (a kind no parser
// of agent output reports), while its own branch still moves.
func TestSandboxNotesOtherRefsTheAgentTouched(t *testing.T) {
	requireSandbox(t)
	tests := []struct{ name, script, note string }{
		{"moved", `git update-ref refs/heads/foreman/B HEAD`,
			"agentcmd: sandbox: refused the agent's move of refs/heads/foreman/B (another branch): not carried back"},
		{"made", `git branch foreman/NEW`,
			"agentcmd: sandbox: refused the agent's new ref refs/heads/foreman/NEW: not carried back"},
		{"deleted", `rm "$(git rev-parse --git-common-dir)/refs/heads/foreman/B"`,
			"agentcmd: sandbox: refused the agent's deletion of refs/heads/foreman/B (another branch): not carried back"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := newTeamLayout(t)
			bBefore := l.ref(t, "foreman/B")
			agent := writeScript(t, t.TempDir(), "agent", "set -e\n"+
				`echo x > own.txt && git add own.txt && git commit -qm own`+"\n"+tt.script+"\n")
			rec := &recorder{}
			res, err := New(Config{Argv: []string{agent}, Env: identity(), Sandbox: Sandbox{Mode: SandboxRequired}}).
				Execute(context.Background(), phases.AgentRequest{WorkspacePath: l.wtA}, rec.callback)
			require.NoError(t, err)
			require.True(t, res.Success, res.Stderr)
			assert.Equal(t, []string{tt.note}, rec.lines(phases.StreamSandbox))
			assert.Equal(t, bBefore, l.ref(t, "foreman/B"))
			assert.Empty(t, gitOut(t, l.repo, "branch", "--list", "foreman/NEW"))
			assert.Equal(t, "own", gitOut(t, l.repo, "log", "-1", "--format=%s", "foreman/A"), "its own branch moved")
			assert.NotContains(t, rec.lines(phases.StreamStderr), tt.note)
		})
	}
}
