package teammetrics_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
	"github.com/agentforeman/foreman/worker"
)

func TestNewRefusesABadConfig(t *testing.T) {
	_, err := teammetrics.New(teammetrics.Config{})
	require.ErrorIs(t, err, teammetrics.ErrInvalidConfig)
	assert.Contains(t, err.Error(), "Registerer")
	_, err = teammetrics.New(teammetrics.Config{Registerer: prometheus.NewRegistry(), StatusTimeout: -time.Second})
	require.ErrorIs(t, err, teammetrics.ErrInvalidConfig)

	// Two on one registry collide, unless their namespaces differ.
	reg := prometheus.NewRegistry()
	_, err = teammetrics.New(teammetrics.Config{Registerer: reg})
	require.NoError(t, err)
	_, err = teammetrics.New(teammetrics.Config{Registerer: reg})
	var already prometheus.AlreadyRegisteredError
	require.True(t, errors.As(err, &already), "got %v", err)
	_, err = teammetrics.New(teammetrics.Config{Registerer: reg, Namespace: "other"})
	require.NoError(t, err)
}

// The worker pool's trouble, as its events report it, counted: what a
// real run rarely shows on cue (a duplicate message, a dead worker).
func TestWorkerTroubleIsCounted(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
	require.NoError(t, err)
	for _, e := range []worker.Event{
		{Kind: worker.EventStale}, {Kind: worker.EventStale}, {Kind: worker.EventDuplicate}, {Kind: worker.EventInvalid},
		{Kind: worker.EventWorkerDead}, {Kind: worker.EventWorkerLost}, {Kind: worker.EventFailed}, {Kind: worker.EventFailed},
		{Kind: worker.EventWorkerStalled},
		{Kind: worker.EventEscalated, Escalation: &worker.Escalation{Kind: worker.CrashLimit}},
		{Kind: worker.EventEscalated, Escalation: &worker.Escalation{Kind: worker.StuckWorker}},
		{Kind: worker.EventHeartbeat}, {Kind: worker.EventProgress}, // routine: not counted anywhere
	} {
		m.ObserveWorkerEvent(e)
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP foreman_worker_stale_messages_total Worker messages ignored as stale (an assignment that is no longer the worker's).
# TYPE foreman_worker_stale_messages_total counter
foreman_worker_stale_messages_total 2
# HELP foreman_worker_duplicate_messages_total Worker messages ignored as duplicates of one already handled.
# TYPE foreman_worker_duplicate_messages_total counter
foreman_worker_duplicate_messages_total 1
# HELP foreman_worker_invalid_messages_total Worker messages refused as invalid.
# TYPE foreman_worker_invalid_messages_total counter
foreman_worker_invalid_messages_total 1
# HELP foreman_worker_crashes_total Workers that crashed, by cause: dead (silent, its probe unanswered), lost (unreachable), failed (its agent failed).
# TYPE foreman_worker_crashes_total counter
foreman_worker_crashes_total{cause="dead"} 1
foreman_worker_crashes_total{cause="failed"} 2
foreman_worker_crashes_total{cause="lost"} 1
# HELP foreman_worker_stalls_total Workers stopped for making no progress.
# TYPE foreman_worker_stalls_total counter
foreman_worker_stalls_total 1
`), "foreman_worker_stale_messages_total", "foreman_worker_duplicate_messages_total", "foreman_worker_invalid_messages_total",
		"foreman_worker_crashes_total", "foreman_worker_stalls_total"))
	v, _ := sample(t, reg, "foreman_worker_escalations_total", map[string]string{"kind": string(worker.CrashLimit)})
	assert.Equal(t, 1.0, v)
	assert.Equal(t, 2.0, sum(t, reg, "foreman_worker_escalations_total"))
}

// Durations come from the events' own times (the team's clock): a stage
// from its start to its report, a story from its first stage (carried by
// the merge event, so also across a restart of the host).
func TestDurationsComeFromTheEventsTimes(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := teammetrics.New(teammetrics.Config{Registerer: reg, StageBuckets: []float64{60, 120}, StoryBuckets: []float64{600}})
	require.NoError(t, err)
	t0 := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	for _, e := range []team.Event{
		{Kind: team.EventStageStarted, At: t0, Story: "A", Role: "builder", Assignment: "A-a3"},
		{Kind: team.EventStageFinished, At: t0.Add(90 * time.Second), Story: "A", Role: "builder", Assignment: "A-a3", Outcome: "COMPLETE"},
		// A report of an assignment that started before this process: no
		// start known, no duration made up.
		{Kind: team.EventStageFinished, At: t0, Story: "B", Role: "builder", Assignment: "B-a3", Outcome: "COMPLETE"},
		// A stage that a newer assignment replaced: the stale report is
		// not timed against the new start.
		{Kind: team.EventStageStarted, At: t0, Story: "C", Role: "planner", Assignment: "C-a1"},
		{Kind: team.EventStageStarted, At: t0.Add(time.Minute), Story: "C", Role: "planner", Assignment: "C-a2"},
		{Kind: team.EventStageFinished, At: t0.Add(2 * time.Minute), Story: "C", Role: "planner", Assignment: "C-a1", Outcome: "COMPLETE"},
		{Kind: team.EventStoryMerged, At: t0.Add(5 * time.Minute), Started: t0, Story: "A"},
		{Kind: team.EventStoryMerged, At: t0.Add(15 * time.Minute), Started: t0, Story: "D"},
		{Kind: team.EventConflict, Story: "E", Outcome: "SQUASH"},
		{Kind: team.EventConflict, Story: "E", Outcome: "REBASE"},
		{Kind: team.EventConflictRework, Story: "E"},
		{Kind: team.EventConflict, Story: "E", Outcome: "SQUASH"},
		{Kind: team.EventStoryPaused, At: t0.Add(time.Minute), Started: t0, Story: "E",
			Escalation: &pipeline.Escalation{Reason: pipeline.ReasonMergeConflict}},
		{Kind: team.EventUsage, Role: "builder", Tokens: 1200, CostUSD: 0.5},
		{Kind: team.EventUsage, Role: "builder", Tokens: 800, CostUSD: 0.25},
	} {
		m.ObserveEvent(e)
	}
	require.NoError(t, testutil.GatherAndCompare(reg, strings.NewReader(`
# HELP foreman_team_stage_duration_seconds From a stage's start to its worker's report, by role and outcome.
# TYPE foreman_team_stage_duration_seconds histogram
foreman_team_stage_duration_seconds_bucket{outcome="COMPLETE",role="builder",le="60"} 0
foreman_team_stage_duration_seconds_bucket{outcome="COMPLETE",role="builder",le="120"} 1
foreman_team_stage_duration_seconds_bucket{outcome="COMPLETE",role="builder",le="+Inf"} 1
foreman_team_stage_duration_seconds_sum{outcome="COMPLETE",role="builder"} 90
foreman_team_stage_duration_seconds_count{outcome="COMPLETE",role="builder"} 1
# HELP foreman_team_story_duration_seconds From a story's first stage to its merge or pause (outcome merged or paused).
# TYPE foreman_team_story_duration_seconds histogram
foreman_team_story_duration_seconds_bucket{outcome="merged",le="600"} 1
foreman_team_story_duration_seconds_bucket{outcome="merged",le="+Inf"} 2
foreman_team_story_duration_seconds_sum{outcome="merged"} 1200
foreman_team_story_duration_seconds_count{outcome="merged"} 2
foreman_team_story_duration_seconds_bucket{outcome="paused",le="600"} 1
foreman_team_story_duration_seconds_bucket{outcome="paused",le="+Inf"} 1
foreman_team_story_duration_seconds_sum{outcome="paused"} 60
foreman_team_story_duration_seconds_count{outcome="paused"} 1
# HELP foreman_team_tokens_total Tokens the agents reported spending, by the role of the stage.
# TYPE foreman_team_tokens_total counter
foreman_team_tokens_total{role="builder"} 2000
# HELP foreman_team_cost_usd_total Money (US dollars) the agents reported spending, by the role of the stage.
# TYPE foreman_team_cost_usd_total counter
foreman_team_cost_usd_total{role="builder"} 0.75
# HELP foreman_team_merge_conflicts_total Merge conflicts met, by step: SQUASH (the squash onto the target), REBASE (conflict triage's rebase onto it).
# TYPE foreman_team_merge_conflicts_total counter
foreman_team_merge_conflicts_total{step="REBASE"} 1
foreman_team_merge_conflicts_total{step="SQUASH"} 2
# HELP foreman_team_conflict_triage_total Conflict triage's moves: rebased (cleanly, gated again), rework (back to a builder with the conflict).
# TYPE foreman_team_conflict_triage_total counter
foreman_team_conflict_triage_total{outcome="rework"} 1
# HELP foreman_team_escalations_total Stories paused for a person, by the escalation's reason (MERGE_CONFLICT, CRASHED, STAGE_ERROR, RETRIES_EXHAUSTED, ...).
# TYPE foreman_team_escalations_total counter
foreman_team_escalations_total{reason="MERGE_CONFLICT"} 1
`), "foreman_team_stage_duration_seconds", "foreman_team_story_duration_seconds", "foreman_team_tokens_total",
		"foreman_team_cost_usd_total", "foreman_team_merge_conflicts_total", "foreman_team_conflict_triage_total",
		"foreman_team_escalations_total"))
}

func TestAMetricsWithoutATeamReportsNoGauges(t *testing.T) {
	reg := prometheus.NewRegistry()
	_, err := teammetrics.New(teammetrics.Config{Registerer: reg})
	require.NoError(t, err)
	_, ok := sample(t, reg, "foreman_team_stories", nil)
	assert.False(t, ok)
}
