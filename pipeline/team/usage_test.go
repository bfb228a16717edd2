package team_test

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// claudeResult is the last line Claude Code prints with
// --output-format stream-json: what the run spent.
const claudeResult = `{"type":"result","subtype":"success","is_error":false,"result":"done","total_cost_usd":0.0125,` +
	`"usage":{"input_tokens":1000,"output_tokens":250}}`

// withSpendingAgent makes the fixture's agent a Claude-format one: the
// scripted agent, then the result line of a run that spent 1,250 tokens
// and $0.0125.
func (f *fixture) withSpendingAgent(t *testing.T) {
	t.Helper()
	bin := filepath.Join(filepath.Dir(f.ctl), "bin")
	wrapper, err := demo.WriteScript(bin, "spending.sh", "#!/bin/sh\n"+demo.ShellQuote(filepath.Join(bin, "agent.sh"))+
		" \"$@\" || exit $?\necho '"+claudeResult+"'\n")
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{wrapper, "{prompt}"}, Format: agentcmd.FormatClaude, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
}

func TestTokensAndCostAreAddedUpPerStoryAndInAll(t *testing.T) {
	f := newFixture(t)
	f.withSpendingAgent(t)
	f.touch(t, "B.bad") // B's first build fails its gates: one more agent run
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b"}))
	res := run(t, tm)
	require.Equal(t, 2, res.Merged, res.String())

	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	// A: plan, validate, build; B: the same and a second build iteration.
	byID := map[foreman.ItemID]team.StoryStatus{}
	for _, s := range st.Stories {
		byID[s.ID] = s
	}
	assert.Equal(t, int64(3*1250), byID["A"].Tokens)
	assert.InDelta(t, 3*0.0125, byID["A"].CostUSD, 1e-9)
	assert.Equal(t, int64(4*1250), byID["B"].Tokens)
	assert.InDelta(t, 4*0.0125, byID["B"].CostUSD, 1e-9)
	assert.Equal(t, int64(7*1250), st.Tokens)
	assert.InDelta(t, 7*0.0125, st.CostUSD, 1e-9)

	assert.Contains(t, st.Text(), "spent in all: 8750 tokens, $0.0875")
	assert.Contains(t, st.Text(), "TOKENS")
	js, err := st.JSON()
	require.NoError(t, err)
	var back struct {
		Tokens  int64   `json:"tokens"`
		CostUSD float64 `json:"costUSD"`
	}
	require.NoError(t, json.Unmarshal(js, &back))
	assert.Equal(t, int64(8750), back.Tokens)

	var usage []team.Event
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventUsage {
			usage = append(usage, e)
		}
	}
	// One report per stage's assignment: the build's covers its two
	// iterations.
	require.Len(t, usage, 6)
	roles := map[string]int64{}
	for _, e := range usage {
		roles[e.Role] += e.Tokens
	}
	assert.Equal(t, map[string]int64{"planner": 2500, "validator": 2500, "builder": 3 * 1250}, roles)

	// Spending is kept in the store: a new team over it reads the same.
	require.NoError(t, tm.Close())
	again := f.newTeam(t)
	st2, err := again.Status(context.Background())
	require.NoError(t, err)
	assert.Equal(t, st.Tokens, st2.Tokens)
	for _, e := range again.Events(0) {
		if e.Kind == team.EventStoryMerged {
			assert.False(t, e.Started.IsZero(), "a merged event says when the story started")
			assert.True(t, !e.At.Before(e.Started))
		}
	}
}

func TestTheTextShowsNoSpendingColumnsWhenNothingWasSpent(t *testing.T) {
	f := newFixture(t)
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "A", Title: "a"}))
	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	assert.NotContains(t, st.Text(), "TOKENS")
	assert.False(t, strings.Contains(st.Text(), "spent in all"))
}
