package team_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// envMCPAgent makes the test binary, re-executed by the team as its agent,
// run TestMCPAgentProcess: an agent that reports only through the team's
// MCP server, with the SDK's client. The variable names its control
// directory, where it reads what to do and writes what the tools answered.
const envMCPAgent = "FOREMAN_TEST_MCP_AGENT"

// TestMCPAgentProcess is the agent, not a test: without envMCPAgent it
// returns at once. As the planner and the validator it reports complete
// and go; as the builder it first reports with the planner's (replaced)
// assignment id and with a forged one, then commits and reports complete,
// or with <story>.nochange reports complete without committing. Each
// answer goes to <ctl>/<story>.answers.
func TestMCPAgentProcess(t *testing.T) {
	ctl := os.Getenv(envMCPAgent)
	if ctl == "" {
		return
	}
	ctx := context.Background()
	id, self := os.Getenv("FOREMAN_ITEM"), foreman.AssignmentID(os.Getenv("FOREMAN_ASSIGNMENT"))
	c, err := agentmcp.Dial(ctx, os.Getenv(agentmcp.EnvURL), os.Getenv(agentmcp.EnvToken))
	require.NoError(t, err)
	defer c.Close()
	answers, err := os.OpenFile(filepath.Join(ctl, id+".answers"), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
	require.NoError(t, err)
	defer answers.Close()
	report := func(what string, r agentmcp.Report) {
		res, err := c.Report(ctx, r)
		var te *agentmcp.ToolError
		switch {
		case errors.As(err, &te):
			fmt.Fprintf(answers, "%s: tool error: %s\n", what, te.Message)
		case err != nil:
			t.Fatal(err)
		default:
			fmt.Fprintf(answers, "%s: %s: %s\n", what, res.Verdict, res.Message)
		}
	}
	four := 4
	switch os.Getenv("FOREMAN_ROLE") {
	case "planner":
		require.NoError(t, os.WriteFile(filepath.Join(ctl, id+".planner"), []byte(self), 0o644))
		report("plan", agentmcp.Report{Assignment: self, Outcome: "complete", Tasks: 2, Score: &four, Summary: "two tasks"})
	case "validator":
		report("validate", agentmcp.Report{Assignment: self, Outcome: "go"})
	default:
		st, err := c.Status(ctx, self)
		require.NoError(t, err)
		fmt.Fprintf(answers, "status: %s %s %s\n", st.State, st.Role, strings.Join(st.Outcomes, "/"))
		if _, err := os.Stat(filepath.Join(ctl, id+".nochange")); err == nil {
			report("nochange", agentmcp.Report{Assignment: self, Outcome: "complete", Summary: "all done (not really)"})
			return
		}
		planner, err := os.ReadFile(filepath.Join(ctl, id+".planner"))
		require.NoError(t, err)
		report("stale", agentmcp.Report{Assignment: foreman.AssignmentID(planner), Outcome: "complete"})
		report("forged", agentmcp.Report{Assignment: foreman.AssignmentID(id + "-a999"), Outcome: "complete"})
		require.NoError(t, os.WriteFile(id+".txt", []byte("ok\n"), 0o644))
		out, err := exec.Command("sh", "-c", "git add -A && git commit -qm "+id).CombinedOutput()
		require.NoError(t, err, "%s", out)
		report("own", agentmcp.Report{Assignment: self, Outcome: "complete", Summary: "wrote " + id + ".txt"})
	}
}

// mcpTeam is a team whose agent is TestMCPAgentProcess: it writes no
// result file and prints no report line, so every report reaches the team
// through its MCP server.
func mcpTeam(t *testing.T) (*fixture, *team.Team) {
	t.Helper()
	f := newFixture(t)
	self, err := os.Executable()
	require.NoError(t, err)
	f.cfg.LandRefused = true // its refused reports are the point, not the pause before landing
	f.cfg.Agent = agentcmd.New(agentcmd.Config{
		Argv: []string{self, "-test.run=^TestMCPAgentProcess$", "-test.count=1"},
		Env:  append(demo.GitEnv(), envMCPAgent+"="+f.ctl),
		// The prompt is not for this agent: nothing is appended to argv.
		PromptVia: agentcmd.PromptStdin,
		Sandbox:   ctlSandbox(f.ctl),
	})
	return f, f.newTeam(t)
}

func answers(t *testing.T, f *fixture, story string) string {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(f.ctl, story+".answers"))
	require.NoError(t, err)
	return string(data)
}

func TestReportsThroughTheMCPServerAdvanceTheStory(t *testing.T) {
	t.Parallel()
	f, tm := mcpTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-001", Title: "first"}))
	res := run(t, tm)
	require.Equal(t, team.StoryMerged, stateOf(res, "US-001").State, res.String())
	assert.Len(t, trailers(t, f.repo), 1)

	got := answers(t, f, "US-001")
	t.Log(got)
	assert.Contains(t, got, "plan: accepted")
	assert.Contains(t, got, "validate: accepted")
	assert.Contains(t, got, "status: current builder complete/error")
	// The builder's token proves the builder's assignment only: a report
	// naming the planner's (ended) assignment or a made-up one is refused.
	assert.Contains(t, got, "stale: tool error: refused: your token is for assignment")
	assert.Contains(t, got, "forged: tool error: refused")
	assert.Contains(t, got, "own: accepted")
	assert.Equal(t, agentmcp.Stats{Accepted: 3, Forged: 2}, tm.MCPStats())

	// The plan's report, with its task count and score, is what the story
	// flow got: the MCP report was the stage's evidence.
	var planLine string
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStageFinished && e.Stage == 0 {
			planLine = e.Line
		}
	}
	assert.Equal(t, "Stage 0 COMPLETE for US-001. 2 tasks created. Plan score: 4/4.", planLine)
}

func TestACompletionWithoutAChangeIsNotTakenFromTheMCPServer(t *testing.T) {
	t.Parallel()
	f, tm := mcpTeam(t)
	f.touch(t, "US-001.nochange")
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-001", Title: "first"}))
	res := run(t, tm)
	s := stateOf(res, "US-001")
	require.Equal(t, team.StoryPaused, s.State, res.String())
	require.NotNil(t, s.Pause)
	assert.Equal(t, pipeline.ReasonStageError, s.Pause.Reason)
	assert.Contains(t, s.Pause.Message, "no changes")
	assert.NotContains(t, s.Pause.Message, "all done (not really)", "a refused report is not kept, not even its summary")
	assert.Empty(t, trailers(t, f.repo))
	assert.Contains(t, answers(t, f, "US-001"), "nochange: tool error: not taken as completion: the workspace has no commits or changes since your assignment began")
	st := tm.MCPStats()
	assert.Zero(t, st.Stale)
	assert.Equal(t, int64(2), st.Accepted, "plan and validate")
	assert.Positive(t, st.Unproven, "each build iteration's report was refused")
}

func TestTheMCPServerCanBeTurnedOff(t *testing.T) {
	stress.Long(t) // every other team test runs with the server on
	t.Parallel()
	f := newFixture(t)
	f.cfg.MCP.Off = true
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-001", Title: "first"}))
	res := run(t, tm)
	require.Equal(t, 1, res.Merged, res.String())
	assert.Equal(t, agentmcp.Stats{}, tm.MCPStats())
}
