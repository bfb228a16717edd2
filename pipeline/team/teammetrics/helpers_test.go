package teammetrics_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// agentScript plays every stage of the story flow, reporting through the
// result file and ending as Claude Code does, with a result line saying
// it spent 1,000 tokens and $0.02. Files in the control directory steer
// it per story:
//
//	<id>.fail-stage-N  exit 3 at stage N (the story pauses)
//	<id>.shared        the build writes shared.txt (with the story's id)
//	                   instead of <id>.txt: two such stories conflict
//	<id>.wait          the build waits until <id>.go exists
const agentScript = `#!/bin/sh
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
printf '{"assignment":"%s","outcome":"%s"}\n' "$FOREMAN_ASSIGNMENT" "$outcome" > "$FOREMAN_RESULT"
echo '{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.02,"usage":{"input_tokens":900,"output_tokens":100}}'
`

func gitEnv() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Metrics Test", "GIT_AUTHOR_EMAIL=metrics@foreman.invalid",
		"GIT_COMMITTER_NAME=Metrics Test", "GIT_COMMITTER_EMAIL=metrics@foreman.invalid"}
}

func git(t testing.TB, dir string, args ...string) {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), gitEnv()...)
	out, err := cmd.CombinedOutput()
	require.NoError(t, err, "git %s: %s", strings.Join(args, " "), out)
}

type fixture struct {
	repo, ctl string
	cfg       team.Config
}

// newFixture makes a real git repository and the Config of a team of the
// scripted agent on it.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	dir := t.TempDir()
	f := &fixture{repo: filepath.Join(dir, "repo"), ctl: filepath.Join(dir, "ctl")}
	for _, d := range []string{f.repo, f.ctl} {
		require.NoError(t, os.MkdirAll(d, 0o755))
	}
	git(t, f.repo, "init", "-q", "-b", "main")
	git(t, f.repo, "commit", "-q", "--allow-empty", "-m", "an empty project")
	script := filepath.Join(dir, "agent.sh")
	require.NoError(t, os.WriteFile(script, []byte(strings.ReplaceAll(agentScript, "%CTL%", "'"+f.ctl+"'")), 0o755))
	f.cfg = team.Config{
		Repo:  f.repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Format: agentcmd.FormatClaude, Env: gitEnv()}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "files", Argv: []string{"sh", "-c", "ls *.txt"}},
		}}}},
		Workers: 4,
		Merge:   merge.Config{GitEnv: gitEnv()[:2], Author: merge.Identity{Name: "Metrics Test", Email: "metrics@foreman.invalid"}},
	}
	return f
}

func (f *fixture) touch(t testing.TB, name string) {
	t.Helper()
	require.NoError(t, os.WriteFile(filepath.Join(f.ctl, name), nil, 0o644))
}

// waitFor returns the first event after seq that matches.
func waitFor(t testing.TB, tm *team.Team, after uint64, match func(team.Event) bool) team.Event {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for e := range tm.Subscribe(ctx, after) {
		if match(e) {
			return e
		}
	}
	t.Fatalf("no matching event after %d", after)
	return team.Event{}
}

// family returns the gathered metric family called name.
func family(t testing.TB, g prometheus.Gatherer, name string) *dto.MetricFamily {
	t.Helper()
	fams, err := g.Gather()
	require.NoError(t, err)
	for _, f := range fams {
		if f.GetName() == name {
			return f
		}
	}
	return nil
}

// sample returns the value of name's series with the given labels (a
// histogram's sample count), and whether there is one.
func sample(t testing.TB, g prometheus.Gatherer, name string, labels map[string]string) (float64, bool) {
	t.Helper()
	f := family(t, g, name)
	if f == nil {
		return 0, false
	}
next:
	for _, m := range f.GetMetric() {
		got := map[string]string{}
		for _, l := range m.GetLabel() {
			got[l.GetName()] = l.GetValue()
		}
		for k, v := range labels {
			if got[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.Counter.GetValue(), true
		case m.Gauge != nil:
			return m.Gauge.GetValue(), true
		case m.Histogram != nil:
			return float64(m.Histogram.GetSampleCount()), true
		}
	}
	return 0, false
}

// sum adds up every series of name.
func sum(t testing.TB, g prometheus.Gatherer, name string) float64 {
	t.Helper()
	f := family(t, g, name)
	if f == nil {
		return 0
	}
	total := 0.0
	for _, m := range f.GetMetric() {
		switch {
		case m.Counter != nil:
			total += m.Counter.GetValue()
		case m.Gauge != nil:
			total += m.Gauge.GetValue()
		case m.Histogram != nil:
			total += float64(m.Histogram.GetSampleCount())
		}
	}
	return total
}
