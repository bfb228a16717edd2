// Package teamtest gives the tests of the packages around the team
// (teamweb, teammetrics, teamnotify) one scripted agent and a real git
// repository to run a team of it on.
package teamtest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// AgentScript plays every stage of the story flow: it reports through the
// result file and, in the build stage, writes <story>.txt and commits; it
// ends as Claude Code does, with a result line saying it spent 1,000
// tokens and $0.02. Files in the control directory (%CTL%) steer it per
// story:
//
//	<id>.fail-stage-N  exit 3 at stage N with "boom N" on stderr (the story pauses)
//	<id>.shared        the build writes shared.txt (with the story's id)
//	                   instead of <id>.txt: two such stories conflict
//	<id>.wait          the build waits until <id>.go exists (the story stays
//	                   running while a test looks at it)
const AgentScript = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
stage=$FOREMAN_STAGE
if [ -e "$ctl/$id.fail-stage-$stage" ]; then echo "boom $stage" >&2; exit 3; fi
outcome=complete
case "$stage" in
1) outcome=go ;;
2) if [ -e "$ctl/$id.wait" ]; then
     n=0
     while [ ! -e "$ctl/$id.go" ]; do n=$((n+1)); [ $n -lt 1200 ] || exit 4; sleep 0.05; done
   fi
   file="$id.txt"
   [ -e "$ctl/$id.shared" ] && file=shared.txt
   echo "$id was here" > "$file"
   git add "$file" && git commit -qm "$id: its file" ;;
esac
printf '{"assignment":"%s","outcome":"%s","summary":"stage %s done"}\n' "$FOREMAN_ASSIGNMENT" "$outcome" "$stage" > "$FOREMAN_RESULT"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.02,"usage":{"input_tokens":900,"output_tokens":100}}'
`

// GitEnv keeps the machine's git configuration out (testrepo.GitEnv,
// first) and commits as who (who@foreman.invalid).
func GitEnv(who string) []string {
	email := emailOf(who)
	return append(testrepo.GitEnv(),
		"GIT_AUTHOR_NAME="+who, "GIT_AUTHOR_EMAIL="+email,
		"GIT_COMMITTER_NAME="+who, "GIT_COMMITTER_EMAIL="+email)
}

func emailOf(who string) string {
	return strings.ToLower(strings.ReplaceAll(who, " ", "-")) + "@foreman.invalid"
}

// Git runs git in dir with env and returns its output; a failure fails t.
func Git(t testing.TB, dir string, env []string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), env...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
	return string(out)
}

// Fixture is a real repository (Repo, with one empty commit on main), the
// scripted agent's control directory (Ctl) and the Config of a team of it
// on the repository: the gate plan wants a *.txt file, 4 workers.
type Fixture struct {
	Repo, Ctl string
	Env       []string
	Config    team.Config
}

// New makes a Fixture whose commits are by who.
func New(t testing.TB, who string) *Fixture {
	t.Helper()
	dir := t.TempDir()
	f := &Fixture{Repo: filepath.Join(dir, "repo"), Ctl: filepath.Join(dir, "ctl"), Env: GitEnv(who)}
	require.NoError(t, os.MkdirAll(f.Ctl, 0o755))
	_, err := testrepo.New(f.Repo, "main", testrepo.Commit{Message: "an empty project", Author: gitexec.Identity{Name: who, Email: emailOf(who)}})
	require.NoError(t, err)
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(AgentScript, "%CTL%", "'"+f.Ctl+"'")), 0o755))
	f.Config = team.Config{
		Repo: f.Repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Format: agentcmd.FormatClaude, Env: f.Env,
			// A sandboxed agent reads its control files where the test writes them.
			Sandbox: agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: f.Ctl}}}}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "files", Argv: []string{"sh", "-c", "ls *.txt"}},
		}}}},
		Workers: 4,
		Merge:   merge.Config{GitEnv: testrepo.GitEnv(), Author: merge.Identity{Name: who, Email: emailOf(who)}},
	}
	return f
}

// Touch creates the control file name (see AgentScript).
func (f *Fixture) Touch(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.Ctl, name), nil, 0o644))
}
