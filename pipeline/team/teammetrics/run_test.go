package teammetrics_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
)

// A real team of scripted agents: A then B merge, C's agent fails (the
// story pauses), X and Y change the same file (X merges, Y meets the
// conflict, conflict triage cannot rebase it, Y's rework cannot change it:
// it pauses). The metrics count what happened, and the gauges show the
// team while Y builds.
func TestMetricsOfARealTeamRun(t *testing.T) {
	t.Parallel()
	f := newFixture(t)
	f.touch(t, "C.fail-stage-0")
	f.touch(t, "X.shared")
	f.touch(t, "Y.shared")
	f.touch(t, "Y.wait") // Y builds once X has merged: a conflict for sure
	reg := prometheus.NewRegistry()
	m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
	require.NoError(t, err)
	var hostSaw atomic.Int64
	f.cfg.OnEvent = func(team.Event) { hostSaw.Add(1) } // the host's own hook is kept (called from many goroutines)
	m.Instrument(&f.cfg)
	tm, err := team.New(context.Background(), f.cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = tm.Close() })
	m.Watch(tm)
	require.NoError(t, tm.Add(context.Background(),
		team.Story{ID: "A", Title: "a"}, team.Story{ID: "B", Title: "b", After: []foreman.ItemID{"A"}},
		team.Story{ID: "C", Title: "c"}, team.Story{ID: "X", Title: "x"}, team.Story{ID: "Y", Title: "y"}))

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	type ran struct {
		res team.Result
		err error
	}
	done := make(chan ran, 1)
	go func() { res, err := tm.Run(ctx); done <- ran{res, err} }()

	// While Y builds: the team runs, Y is a running story, its worker is
	// taken (reserved or busy).
	waitFor(t, tm, 0, func(e team.Event) bool { return e.Kind == team.EventStageStarted && e.Story == "Y" && e.Stage == 2 })
	running, _ := sample(t, reg, "foreman_team_running", nil)
	assert.Equal(t, 1.0, running)
	stories, _ := sample(t, reg, "foreman_team_stories", map[string]string{"state": "running"})
	assert.GreaterOrEqual(t, stories, 1.0)
	busy, _ := sample(t, reg, "foreman_worker_workers", map[string]string{"state": "Busy"})
	reserved, _ := sample(t, reg, "foreman_worker_workers", map[string]string{"state": "Reserved"})
	assert.GreaterOrEqual(t, busy+reserved, 1.0, "Y's worker")
	waitFor(t, tm, 0, func(e team.Event) bool { return e.Kind == team.EventStoryMerged && e.Story == "X" })
	f.touch(t, "Y.go")

	r := <-done
	require.NoError(t, r.err)
	require.Equal(t, 3, r.res.Merged, r.res.String())
	require.Equal(t, 2, r.res.Paused, r.res.String())

	counter := func(name string, labels map[string]string) float64 {
		v, ok := sample(t, reg, name, labels)
		assert.True(t, ok, "%s%v is reported", name, labels)
		return v
	}
	assert.Equal(t, 3.0, counter("foreman_team_merges_total", nil))
	assert.Equal(t, 3.0, counter("foreman_team_events_total", map[string]string{"kind": "story_merged"}))
	// Y's squash conflicts; conflict triage's rebase conflicts too, and Y
	// goes back to a builder once; what pauses it then is the flow's.
	assert.Equal(t, 1.0, counter("foreman_team_merge_conflicts_total", map[string]string{"step": "SQUASH"}))
	assert.Equal(t, 1.0, counter("foreman_team_merge_conflicts_total", map[string]string{"step": "REBASE"}))
	assert.Equal(t, 1.0, counter("foreman_team_conflict_triage_total", map[string]string{"outcome": "rework"}))
	// Every pause counted by its reason, as the status has them: C's
	// failing agent is a stage's ERROR report, not a worker's crash.
	reasons := map[string]float64{}
	for _, s := range r.res.Stories {
		if s.Pause != nil {
			reasons[string(s.Pause.Reason)]++
		}
	}
	require.Equal(t, pipeline.ReasonStageError, stateOf(r.res, "C").Pause.Reason)
	for reason, n := range reasons {
		assert.Equal(t, n, counter("foreman_team_escalations_total", map[string]string{"reason": reason}), reason)
	}
	assert.Equal(t, 2.0, sum(t, reg, "foreman_team_escalations_total"))
	assert.Equal(t, 1.0, counter("foreman_team_stages_finished_total", map[string]string{"role": "planner", "outcome": "ERROR"}))
	// Every stage had a fresh worker: reserved, busy, told to stop, gone.
	stages := 0.0
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStageStarted {
			stages++
		}
	}
	for _, tr := range [][2]string{{"Idle", "Reserved"}, {"Reserved", "Busy"}, {"Busy", "ShuttingDown"}, {"ShuttingDown", "Stopped"}} {
		assert.Equal(t, stages, counter("foreman_worker_transitions_total", map[string]string{"from": tr[0], "to": tr[1]}), tr)
	}
	assert.Equal(t, stages, counter("foreman_team_events_total", map[string]string{"kind": "stage_started"}))
	// A, B, X and Y each ran a planner and a validator that spent 1,000
	// tokens and $0.02; C's agent failed before it said. Builders too,
	// Y's rework's perhaps (if it got to its result line).
	for _, role := range []string{"planner", "validator"} {
		assert.Equal(t, 4000.0, counter("foreman_team_tokens_total", map[string]string{"role": role}), role)
		assert.InDelta(t, 0.08, counter("foreman_team_cost_usd_total", map[string]string{"role": role}), 1e-9, role)
	}
	assert.GreaterOrEqual(t, counter("foreman_team_tokens_total", map[string]string{"role": "builder"}), 4000.0)
	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	spent, _ := sample(t, reg, "foreman_team_spent_tokens", nil)
	assert.Equal(t, float64(st.Tokens), spent, "the status's total")
	assert.Equal(t, sum(t, reg, "foreman_team_tokens_total"), spent, "the counters add up to the status's total")
	assert.Equal(t, 3.0, counter("foreman_team_story_duration_seconds", map[string]string{"outcome": "merged"}))
	assert.Equal(t, 2.0, counter("foreman_team_story_duration_seconds", map[string]string{"outcome": "paused"}))
	assert.Equal(t, 4.0, counter("foreman_team_stage_duration_seconds", map[string]string{"role": "planner", "outcome": "COMPLETE"}))
	assert.Equal(t, 4.0, counter("foreman_team_stages_finished_total", map[string]string{"role": "validator", "outcome": "GO"}))
	assert.Equal(t, 3.0, counter("foreman_team_stories", map[string]string{"state": "merged"}))
	assert.Equal(t, 0.0, counter("foreman_team_running", nil))
	_, workers := sample(t, reg, "foreman_worker_workers", nil)
	assert.False(t, workers, "no worker pool once the run ended")
	last, _ := sample(t, reg, "foreman_team_last_event_seq", nil)
	evs := tm.Events(0)
	assert.Equal(t, float64(evs[len(evs)-1].Seq), last)
	assert.Equal(t, int64(len(evs)), hostSaw.Load())

	// The exposition a scraper reads.
	srv := httptest.NewServer(promhttp.HandlerFor(reg, promhttp.HandlerOpts{}))
	defer srv.Close()
	resp, err := http.Get(srv.URL)
	require.NoError(t, err)
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	require.NoError(t, err)
	assert.Contains(t, string(body), "foreman_team_merges_total 3\n")
	assert.Contains(t, string(body), `foreman_team_merge_conflicts_total{step="SQUASH"} 1`)
}

func stateOf(res team.Result, id foreman.ItemID) team.StoryStatus {
	for _, s := range res.Stories {
		if s.ID == id {
			return s
		}
	}
	return team.StoryStatus{}
}
