package team_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// hookAgent plays every stage; its build commits check-hook.sh, which the
// gate runs as go test runs a committed _test.go: SNEAK's reaches for
// what the agent itself cannot; HONEST commits none (two stories adding
// the file would conflict).
const hookAgent = `#!/bin/sh
set -eu
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":1,"score":4' ;;
validator) report go ',"score":9' ;;
*) if [ "$FOREMAN_ITEM" = SNEAK ]; then
     cat > check-hook.sh <<'EOF'
#!/bin/sh
echo evil >> %REPO%/go.mod 2>/dev/null
echo evil > %REPO%/.foreman/foreman.db 2>/dev/null
echo evil > %HOSTHOME%/planted 2>/dev/null
{ env; cat /etc/shadow %HOSTHOME%/credentials; } > loot.txt 2>&1
git update-ref refs/heads/main HEAD
exit 0
EOF
     chmod +x check-hook.sh
   fi
   echo ok > "$FOREMAN_ITEM.txt" && git add -A && git commit -qm "$FOREMAN_ITEM: ok"
   report complete ',"summary":"wrote the file"' ;;
esac
`

// The gates run the story's code (a committed test, a build script): in
// the agent's sandbox, with the agent's rights. SNEAK's committed hook,
// run by the gate, writes into the main checkout, the state directory and
// the host's home, moves main and collects the environment and secrets:
// nothing real changes, its loot holds no secret, each attempt is an
// EventRefused of the gate's, and SNEAK waits for a person while HONEST
// lands.
// hookCheck runs the story's check-hook.sh where it has one.
const hookCheck = "if [ -e check-hook.sh ]; then ./check-hook.sh; fi"

func TestTheGatesRunTheStorysCodeInTheAgentsSandbox(t *testing.T) {
	ctx := context.Background()
	tm, repo, hostHome := hookTeam(t, func(c *team.Config) {
		c.Gates = phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "hook", Argv: []string{"sh", "-c", hookCheck}}}}}}
	})
	goMod, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)

	res := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "HONEST").State, res.String())
	sneak := stateOf(res, "SNEAK")
	require.Equal(t, team.StoryPaused, sneak.State, res.String())
	require.NotNil(t, sneak.Pause)
	// The build's gates and the quality gate (its loot changed the
	// worktree, so the change was verified again) each ran the hook.
	// and the first left its loot in the worktree: counted too.
	assert.Contains(t, sneak.Pause.Message, "its agents were refused 9 time(s) since a person last looked (the last: gate check")
	assert.Contains(t, sneak.Pause.Message, "; 5 kinds of attempt in all, each in the story's status (RefusedKinds)")

	var refused []string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventRefused {
			assert.Equal(t, "SNEAK", string(e.Story), e.Detail)
			refused = append(refused, e.Detail)
		}
	}
	joined := strings.Join(refused, "\n")
	for _, want := range []string{
		`gate check "hook" (sandboxed, running the story's code): refused the check's move of refs/heads/main (another branch): not carried back`,
		`gate check "hook" (sandboxed, running the story's code): wrote "planted" into the hidden host's home`,
		`gate check "hook" (sandboxed, running the story's code): wrote "foreman.db" into the hidden state directory`,
		`gate check "hook" (sandboxed, running the story's code): wrote "go.mod" into the hidden main checkout`,
		`the gates changed "loot.txt" in the worktree they verified: the change that lands is not the one they checked`,
	} {
		assert.Contains(t, joined, want)
	}

	// Nothing real changed, and what it collected holds no secret.
	assert.Equal(t, []string{"HONEST"}, trailers(t, repo), "main moved by HONEST's landing only")
	after, err := os.ReadFile(filepath.Join(repo, "go.mod"))
	require.NoError(t, err)
	assert.Equal(t, string(goMod), string(after))
	assert.NoFileExists(t, filepath.Join(hostHome, "planted"))
	rs, err := team.ReadStatus(ctx, team.Config{Repo: repo})
	require.NoError(t, err, "the database is intact")
	assert.Len(t, rs.Stories, 2)
	loot, err := os.ReadFile(filepath.Join(repo, ".worktrees", "SNEAK", "loot.txt"))
	require.NoError(t, err)
	for _, secret := range []string{"webhook-secret", "the-agents-key", "hunter2", "root:"} {
		assert.NotContains(t, string(loot), secret)
	}
}

// The post-merge check (Config.MergeCheck) runs the squash's code too: in
// the agents' sandbox. SNEAK's hook, run by it, is refused and fails the
// check though it exits 0: SNEAK pauses with the cause, HONEST lands,
// nothing real changed.
func TestTheMergeCheckRunsInTheAgentsSandbox(t *testing.T) {
	ctx := context.Background()
	tm, repo, hostHome := hookTeam(t, func(c *team.Config) {
		c.LandRefused = true // the merge check's own refusal is the point
		c.MergeCheck = []string{"sh", "-c", hookCheck}
	})
	res := run(t, tm)
	assert.Equal(t, team.StoryMerged, stateOf(res, "HONEST").State, res.String())
	sneak := stateOf(res, "SNEAK")
	require.Equal(t, team.StoryPaused, sneak.State, res.String())
	require.NotNil(t, sneak.Pause)
	assert.Contains(t, sneak.Pause.Message, `post-merge check "sh -c `+hookCheck+`" for SNEAK reached beyond its checkout (exit 0), refused by its sandbox`)
	assert.Contains(t, sneak.Pause.Message, `wrote "planted" into the hidden host's home`)
	st, err := tm.Status(ctx)
	require.NoError(t, err)
	assert.Equal(t, int64(4), st.Refused, "each note of the check's sandbox counted as SNEAK's")
	var events int
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventRefused {
			assert.Equal(t, "SNEAK", string(e.Story))
			assert.Contains(t, e.Detail, "the post-merge check (sandboxed, running the squash's code): ")
			events++
		}
	}
	assert.Equal(t, 4, events)
	assert.Equal(t, []string{"HONEST"}, trailers(t, repo))
	assert.NoFileExists(t, filepath.Join(hostHome, "planted"))
	// The checks' homes: SNEAK's worktree's (its gates; it is paused) is
	// kept, HONEST's went with its worktree, the merge checkouts' with
	// them.
	homes, err := filepath.Glob(filepath.Join(repo, team.StateDirName, "leases", "homes", "*.gates"))
	require.NoError(t, err)
	assert.Len(t, homes, 1, "%v", homes)
	_, err = team.ReadStatus(ctx, team.Config{Repo: repo})
	require.NoError(t, err, "the database is intact")
}

// hookTeam is a sandboxed team of HONEST and SNEAK (hookAgent) in a Go
// module repository outside /tmp, the host's $HOME a temporary directory
// with a credentials file and secrets in the environment (so its caller
// is not parallel); mod sets the gates.
func hookTeam(t *testing.T, mod func(*team.Config)) (tm *team.Team, repo, hostHome string) {
	t.Helper()
	requireSandbox(t)
	ctx := context.Background()
	hostHome = t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(hostHome, "credentials"), []byte("hunter2"), 0o600))
	t.Setenv("HOME", hostHome)
	t.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	t.Setenv("ANTHROPIC_API_KEY", "the-agents-key")
	repo = filepath.Join(hostileBase(t), "repo")
	require.NoError(t, demo.NewGoModuleRepo(ctx, repo))
	body := strings.NewReplacer("%REPO%", demo.ShellQuote(repo), "%HOSTHOME%", demo.ShellQuote(hostHome)).Replace(hookAgent)
	script, err := demo.WriteScript(t.TempDir(), "hook-agent.sh", body)
	require.NoError(t, err)
	cfg := team.Config{
		Repo: repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(),
			Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "true", Argv: []string{"true"}}}}}},
		Merge: merge.Config{GitEnv: demo.IsolatedGitConfig()},
	}
	mod(&cfg)
	tm, err = team.New(ctx, cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	require.NoError(t, tm.Add(ctx, team.Story{ID: "HONEST", Title: "honest"}, team.Story{ID: "SNEAK", Title: "its test reaches out"}))
	return tm, repo, hostHome
}
