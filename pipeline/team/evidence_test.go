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
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

func TestAGateFailureIsReworkedWithTheGatesOutput(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "US-001.bad")
	tm := f.newTeam(t)
	ctx := context.Background()
	require.NoError(t, tm.Add(ctx, team.Story{ID: "US-001", Title: "first"}))
	res := run(t, tm)
	require.Equal(t, 1, res.Merged, res.String())
	// The build's own run loop saw the gate fail on BAD and got the output
	// as feedback: the second iteration fixed it; main has the fix only.
	data, err := os.ReadFile(filepath.Join(f.repo, "US-001.txt"))
	require.NoError(t, err)
	assert.Equal(t, "fixed\n", string(data))
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "US-001 stage 2 "), "two build iterations:\n%s", log)
	var gates []string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventGates {
			gates = append(gates, string(e.Outcome))
			if e.Outcome == "FAIL" {
				assert.Contains(t, e.Detail, "BAD content")
			}
		}
	}
	assert.Equal(t, []string{"FAIL", "PASS"}, gates, "each build iteration's gates; the quality gate did not run them again")
}

func TestCompletionNeedsEvidence(t *testing.T) {
	t.Parallel()
	cases := map[string]struct {
		control   string
		merged    bool
		pauseText string
	}{
		// Only the printed line, no result file: the fallback is taken.
		"canonical line": {control: "line", merged: true},
		// The build reports nothing, but its commits pass the gates.
		"silent build with commits": {control: "silent", merged: true},
		// A claim without a change is not believed.
		"claim without changes": {control: "nochange", pauseText: "no changes"},
		// A result file for another assignment is ignored; the plan stage
		// has no other report, so it pauses saying so.
		"forged assignment": {control: "forged", pauseText: "not the current"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			f.touch(t, "US-001."+c.control)
			tm := f.newTeam(t)
			require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-001", Title: "first"}))
			res := run(t, tm)
			s := stateOf(res, "US-001")
			if c.merged {
				assert.Equal(t, team.StoryMerged, s.State, res.String())
				assert.Len(t, trailers(t, f.repo), 1)
				return
			}
			require.Equal(t, team.StoryPaused, s.State, res.String())
			require.NotNil(t, s.Pause)
			assert.Equal(t, pipeline.ReasonStageError, s.Pause.Reason)
			t.Log(s.Pause.Message)
			assert.Contains(t, s.Pause.Message, c.pauseText)
			assert.Empty(t, trailers(t, f.repo))
		})
	}
}

// The quality gate does not run the gate plan again on a change the build
// verified with it; given a plan of its own, it runs that.
func TestTheQualityGateDoesNotRerunWhatTheBuildVerified(t *testing.T) {
	t.Parallel()
	for name, own := range map[string]bool{"same plan": false, "own plan": true} {
		t.Run(name, func(t *testing.T) {
			f := newFixture(t)
			counted := gatePlan()
			counted.Levels[0].Checks = append(counted.Levels[0].Checks, phases.GateCheck{Name: "count",
				Argv: []string{"sh", "-c", "echo run >> " + demo.ShellQuote(filepath.Join(f.ctl, "gates"))}})
			f.cfg.Gates = counted
			if own {
				f.cfg.QualityGates = counted
			}
			tm := f.newTeam(t)
			require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "a"}))
			res := run(t, tm)
			require.Equal(t, 1, res.Merged, res.String())
			runs, err := os.ReadFile(filepath.Join(f.ctl, "gates"))
			require.NoError(t, err)
			want := 1 // the build's one iteration
			if own {
				want = 2
			}
			assert.Equal(t, want, strings.Count(string(runs), "run"))
		})
	}
}
