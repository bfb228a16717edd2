package teammetrics_test

import (
	"fmt"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
)

// A host makes the metrics on its own registry, lets them see the team's
// events (Instrument, before team.New; here two events by hand) and
// serves the registry with promhttp.
func Example() {
	reg := prometheus.NewRegistry()
	m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
	if err != nil {
		panic(err)
	}
	var cfg team.Config
	m.Instrument(&cfg) // then team.New(ctx, cfg), m.Watch(t)

	start := time.Date(2026, 11, 24, 9, 0, 0, 0, time.UTC)
	cfg.OnEvent(team.Event{Seq: 41, Kind: team.EventUsage, Role: "builder", Tokens: 5200, CostUSD: 0.31})
	cfg.OnEvent(team.Event{Seq: 42, Kind: team.EventStoryMerged, Story: "US-001", At: start.Add(12 * time.Minute), Started: start})

	// What a scrape would read: the counters that moved, and the story's
	// duration.
	fams, _ := reg.Gather()
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			labels := ""
			for _, l := range mt.GetLabel() {
				labels += fmt.Sprintf("%s=%q", l.GetName(), l.GetValue())
			}
			switch {
			case mt.GetCounter().GetValue() > 0:
				fmt.Printf("%s{%s} %g\n", f.GetName(), labels, mt.GetCounter().GetValue())
			case mt.GetHistogram().GetSampleCount() > 0:
				fmt.Printf("%s{%s} sum %gs\n", f.GetName(), labels, mt.GetHistogram().GetSampleSum())
			}
		}
	}
	// Output:
	// foreman_team_cost_usd_total{role="builder"} 0.31
	// foreman_team_events_total{kind="story_merged"} 1
	// foreman_team_events_total{kind="usage"} 1
	// foreman_team_merges_total{} 1
	// foreman_team_story_duration_seconds{outcome="merged"} sum 720s
	// foreman_team_tokens_total{role="builder"} 5200
}
