package main

import (
	"bytes"
	"context"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// requireCLI skips a test whose real CLI is not installed, and fails it
// under CI=true, where the real CLIs must run.
func requireCLI(t *testing.T, name string) {
	t.Helper()
	if _, err := findCLI(name); err != nil {
		if ci, _ := strconv.ParseBool(os.Getenv("CI")); ci {
			t.Fatalf("%v (CI=true requires the real CLIs)", err)
		}
		t.Skip(err)
	}
}

// -real: the quickstart's stories done by the real Claude Code and Codex
// CLIs against the scripted model it serves itself. The demo plays as with
// the scripted agent: US-003's first build fails the gates and the CLI,
// resumed with their output, fixes it; US-002 meets the merge conflict, is
// given back once and pauses naming calc.go; the rest merge once each.
func TestQuickstartWithARealCLI(t *testing.T) {
	skipUnlessLong(t) // 30-40 s: the CLIs' runs and the gates' go vet and go test (CI runs it)
	for _, tc := range []struct {
		cli     string
		stories int
	}{
		{"claude", 3}, // Claude Code takes 2-5 s a stage: the first three stories show it all
		{"codex", 6},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			requireCLI(t, tc.cli)
			t.Parallel()
			var out bytes.Buffer
			res, err := run(context.Background(), options{stories: tc.stories, parallel: 3, real: tc.cli, keep: true, dir: t.TempDir(),
				timeout: 4 * time.Minute}, &out)
			require.NoError(t, err, out.String())
			text := out.String()
			assert.Contains(t, text, "The agents are the real "+tc.cli+" CLI")

			stories := byID(res.Result)
			merged := map[string]int{}
			for _, id := range gitLines(t, res.Repo, "log", "--format=%(trailers:key=Foreman-Item,valueonly)", "main") {
				merged[id]++
			}
			want := map[string]int{}
			for _, s := range demoStories(tc.stories) {
				if s.ID != "US-002" {
					want[string(s.ID)] = 1
					assert.Equal(t, team.StoryMerged, stories[s.ID].State, "%s\n%s", s.ID, text)
				}
			}
			assert.Equal(t, want, merged, "one squash commit per merged story\n"+text)

			paused := stories["US-002"]
			require.Equal(t, team.StoryPaused, paused.State, text)
			require.NotNil(t, paused.Pause)
			assert.Equal(t, pipeline.ReasonMergeConflict, paused.Pause.Reason)
			assert.Equal(t, []string{"calc.go"}, paused.Pause.Files)
			assert.Contains(t, text, "triage: rebased onto main 2 times, given back to its agent once")

			var gates []pipeline.Outcome
			for _, e := range res.Events {
				if e.Story == "US-003" && e.Kind == team.EventGates {
					gates = append(gates, e.Outcome)
				}
			}
			assert.Equal(t, []pipeline.Outcome{"FAIL", "PASS"}, gates[:2], "US-003's first build failed the gates, the CLI fixed it\n"+text)
			assert.Equal(t, []string{"US-003: fix after the gates feedback", "US-003: Mul: the product of two integers"},
				strings.Split(strings.TrimSpace(gitOut(t, res.Repo, "log", "--format=%s", "main..foreman/US-003")), "\n"))
			for _, id := range []foreman.ItemID{"US-001", "US-003"} {
				assert.Positive(t, stories[id].Tokens, "the tokens the CLI reported, %s", id)
			}
		})
	}
}

// Without the CLI installed, -real says how to install it.
func TestQuickstartRealWithoutTheCLI(t *testing.T) {
	t.Setenv("FOREMAN_AGENT_BIN", t.TempDir())
	var out bytes.Buffer
	_, err := run(context.Background(), options{stories: 1, parallel: 1, real: "claude", dir: t.TempDir(), timeout: time.Minute}, &out)
	require.ErrorIs(t, err, errNoCLI)
	assert.Contains(t, err.Error(), ".ci/install-agents")

	_, err = run(context.Background(), options{stories: 1, parallel: 1, real: "claude", agent: "x {prompt}", dir: t.TempDir(), timeout: time.Minute}, &out)
	assert.ErrorContains(t, err, "-real runs its own CLI")
	_, err = run(context.Background(), options{stories: 1, parallel: 1, real: "aider", dir: t.TempDir(), timeout: time.Minute}, &out)
	assert.ErrorContains(t, err, `-real "aider": claude or codex`)
}
