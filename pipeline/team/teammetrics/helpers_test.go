package teammetrics_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/internal/teamtest"
	"github.com/agentforeman/foreman/pipeline/team"
)

type fixture struct {
	repo, ctl string
	cfg       team.Config
}

// newFixture makes a real git repository and the Config of a team of the
// scripted agent (teamtest.AgentScript) on it.
func newFixture(t testing.TB) *fixture {
	t.Helper()
	tf := teamtest.New(t, "Metrics Test")
	return &fixture{repo: tf.Repo, ctl: tf.Ctl, cfg: tf.Config}
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
