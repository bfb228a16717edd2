package teammetrics_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team"
	"github.com/agentforeman/foreman/pipeline/team/teammetrics"
)

// What the metrics cost the team: ObserveEvent of a stage's start and
// report (two events, the stage timed), against Team.Add of one story (its
// records and its durable event) in the same run; and one scrape of a
// watched team of 1,000 and of 10,000 stories (it reads Team.Summary:
// counts), against Team.Status alone.
//
//	go test -run '^$' -bench . ./pipeline/team/teammetrics/
func BenchmarkObserveEvent(b *testing.B) {
	m, err := teammetrics.New(teammetrics.Config{Registerer: prometheus.NewRegistry()})
	require.NoError(b, err)
	t0 := time.Now()
	b.Run("stage started and finished", func(b *testing.B) {
		i := 0
		for b.Loop() {
			story := foreman.ItemID(fmt.Sprintf("S-%d", i%1000))
			a := foreman.AssignmentID(fmt.Sprintf("%s-a%d", story, i))
			m.ObserveEvent(team.Event{Kind: team.EventStageStarted, At: t0, Story: story, Role: "builder", Assignment: a})
			m.ObserveEvent(team.Event{Kind: team.EventStageFinished, At: t0.Add(time.Minute), Story: story, Role: "builder",
				Assignment: a, Outcome: "COMPLETE"})
			i++
		}
	})
	b.Run("baseline: a story added (its event recorded)", func(b *testing.B) {
		f := newFixture(b)
		tm, err := team.New(context.Background(), f.cfg)
		require.NoError(b, err)
		defer tm.Close()
		i := 0
		for b.Loop() {
			require.NoError(b, tm.Add(context.Background(), team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%d", i)), Title: "a story"}))
			i++
		}
	})
}

func BenchmarkScrape(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		f := newFixture(b)
		reg := prometheus.NewRegistry()
		m, err := teammetrics.New(teammetrics.Config{Registerer: reg})
		require.NoError(b, err)
		m.Instrument(&f.cfg)
		tm, err := team.New(context.Background(), f.cfg)
		require.NoError(b, err)
		m.Watch(tm)
		stories := make([]team.Story, n)
		for i := range stories {
			stories[i] = team.Story{ID: foreman.ItemID(fmt.Sprintf("S-%05d", i)), Title: "a story"}
		}
		require.NoError(b, tm.Add(context.Background(), stories...))
		b.Run(fmt.Sprintf("baseline: Team.Status/%d", n), func(b *testing.B) {
			for b.Loop() {
				_, err := tm.Status(context.Background())
				require.NoError(b, err)
			}
		})
		b.Run(fmt.Sprintf("Gather/%d", n), func(b *testing.B) {
			for b.Loop() {
				_, err := reg.Gather()
				require.NoError(b, err)
			}
		})
		require.NoError(b, tm.Close())
	}
}
