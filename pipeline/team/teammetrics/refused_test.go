package teammetrics_test

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
)

// sandboxNotes is the scripted agent's driver that also says, at a story's
// plan stage, what its OS sandbox refused (phases.StreamSandbox, as
// agentcmd's driver does after the agent): each note is one refusal.
type sandboxNotes struct {
	phases.AgentDriver
	notes map[foreman.ItemID][]string
}

func (d sandboxNotes) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	if a, ok := pipeline.ParseAssignment(req.TaskPrompt); ok && a.Stage == 0 && onEvent != nil {
		for _, n := range d.notes[a.Item] {
			onEvent(phases.StreamEvent{Kind: phases.StreamSandbox, Text: "agentcmd: sandbox: " + n})
		}
	}
	return d.AgentDriver.Execute(ctx, req, onEvent)
}

// The refused attempts are a gauge read from the team's status at every
// scrape: every one counted, where the events leave some out, and the
// same after a restart of the host (the status is durable, the counters
// are not).
func TestRefusedAttemptsAreAGaugeOfTheStatus(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.cfg.Agent = sandboxNotes{AgentDriver: f.cfg.Agent, notes: map[foreman.ItemID][]string{
		"R": {`wrote "EVIL" into the hidden main checkout: a decoy, nothing real changed`, `opened the canary ".env"`},
		"S": {`wrote "x" into the hidden state directory: a decoy`},
	}}
	f.cfg.LandRefused = true // they land: the point is the count
	scrape := func(tm *team.Team) *prometheus.Registry {
		reg := prometheus.NewRegistry()
		m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
		require.NoError(t, err)
		m.Watch(tm)
		return reg
	}
	tm, err := team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	reg := scrape(tm)
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP foreman_team_refused_attempts Attempts of the stories' agents and gate checks beyond their own assignments that the team refused, over every run of the team (from its status: every one, where the refused events leave out an assignment's own requests past ten).
# TYPE foreman_team_refused_attempts gauge
foreman_team_refused_attempts 0
`), "foreman_team_refused_attempts"), "reported at zero before any refusal")
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "R", Title: "r"}, team.Story{ID: "S", Title: "s"},
		team.Story{ID: "T", Title: "t"}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := tm.Run(ctx)
	require.NoError(t, err)
	require.Equal(t, 3, res.Merged, res.String())

	st, err := tm.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(3), st.Refused)
	got, ok := sample(t, reg, "foreman_team_refused_attempts", nil)
	require.True(t, ok)
	assert.Equal(t, 3.0, got, "the status's total")

	// A restart: a new host's metrics start at zero, the gauge does not.
	require.NoError(t, tm.Close())
	tm, err = team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	got, _ = sample(t, scrape(tm), "foreman_team_refused_attempts", nil)
	assert.Equal(t, 3.0, got, "after a restart")
}
