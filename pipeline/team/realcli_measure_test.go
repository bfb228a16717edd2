package team_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/internal/stress"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// agentRuns records, from agentcmd's log, when each agent process finished
// and how long it ran (its Duration: from just before its start to its
// exit, the sandbox's start-up included).
type agentRuns struct {
	mu   sync.Mutex
	runs []agentRun
}

type agentRun struct {
	end time.Time
	d   time.Duration
}

func (a *agentRuns) Enabled(context.Context, slog.Level) bool { return true }
func (a *agentRuns) WithAttrs([]slog.Attr) slog.Handler       { return a }
func (a *agentRuns) WithGroup(string) slog.Handler            { return a }
func (a *agentRuns) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "agent finished" {
		return nil
	}
	r.Attrs(func(at slog.Attr) bool {
		if at.Key == "duration" {
			a.mu.Lock()
			a.runs = append(a.runs, agentRun{end: r.Time, d: at.Value.Duration()})
			a.mu.Unlock()
		}
		return true
	})
	return nil
}

// within sums the runs that ended in [from, to].
func (a *agentRuns) within(from, to time.Time) (time.Duration, int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	var sum time.Duration
	n := 0
	for _, r := range a.runs {
		if !r.end.Before(from) && !r.end.After(to) {
			sum += r.d
			n++
		}
	}
	return sum, n
}

// claudeCost is the served tokens at Claude Code 2.1.328's list price of
// its default model, claude-opus-5-5, in USD per million tokens (measured:
// a turn served 10^6 tokens of one kind costs $4 input, $20 output, $0.20
// cache read, $5 cache write).
func claudeCost(t *testing.T, reqs []modeltest.Request) float64 {
	t.Helper()
	var cost float64
	for _, r := range reqs {
		u := r.Served.Usage
		if u == (modeltest.Usage{}) {
			continue
		}
		require.Equal(t, "claude-opus-5-5", r.Model, "a request to a model whose price the test does not know")
		cost += (4*float64(u.InputTokens) + 20*float64(u.OutputTokens) + 0.2*float64(u.CacheReadInputTokens) +
			5*float64(u.CacheCreationInputTokens)) / 1e6
	}
	return cost
}

// TestRealCLIStageShares runs stories through every stage with each real
// CLI against an instant scripted model, one at a time, and reports how a
// stage's wall time splits between the CLI's own process (start-up and
// run) and Foreman's share (the rest: worktree, prompt, MCP, result file,
// snapshot, gates, records, merge). It asserts no time, only that the
// tokens Foreman read (Status) are exactly those the server served, and
// the cost too: Claude Code prices them itself (total_cost_usd), Codex and
// Gemini CLI report none. FOREMAN_MEASURE=N runs N stories (default 1).
func TestRealCLIStageShares(t *testing.T) {
	n := 1
	if v := os.Getenv("FOREMAN_MEASURE"); v != "" {
		var err error
		n, err = strconv.Atoi(v)
		require.NoError(t, err, "FOREMAN_MEASURE=N: the number of stories")
	}
	for _, cli := range append(realCLIs(), geminiCLI()) {
		t.Run(string(cli.name), func(t *testing.T) {
			if cli.name == realagent.Gemini && n == 1 {
				stress.Long(t) // 20-30 s: Gemini CLI's start-up; CI runs it
			}
			var scripts []modeltest.Script
			var stories []team.Story
			for i := range n {
				id := fmt.Sprintf("M%02d", i+1)
				file := id + ".txt"
				scripts = append(scripts,
					modeltest.Script{Match: "You are the planner for story " + id + ":", Turns: []modeltest.Turn{
						realagent.SayLine("Stage 0 COMPLETE for %s. 1 tasks created. Plan score: 4/4.")}},
					modeltest.Script{Match: "You are the validator for story " + id + ":", Turns: []modeltest.Turn{
						realagent.SayLine("Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 9.")}},
					modeltest.Script{Match: "You are the builder for story " + id + ":", Turns: append(writeAndCommit(file, "m\n"),
						realagent.SayLine("Stage 2 COMPLETE for %s. Implementation done."))})
				s := team.Story{ID: foreman.ItemID(id), Title: "write " + file}
				if i > 0 {
					s.After = []foreman.ItemID{stories[i-1].ID}
				}
				stories = append(stories, s)
			}
			srv := modeltest.Start(t, scripts...)
			runs := &agentRuns{}
			tm, _ := realTeam(t, realCLI{cli.name, cli.format, func(t *testing.T, url string, cfg agentcmd.Config) *agentcmd.Driver {
				cfg.Logger = slog.New(runs)
				return cli.driver(t, url, cfg)
			}}, srv, func(c *team.Config) { c.Workers = 1 })
			require.NoError(t, tm.Add(context.Background(), stories...))

			res := runReal(t, tm)

			st, err := tm.Status(context.Background())
			require.NoError(t, err)
			require.Equal(t, n, res.Merged, "%s\n%s", res.String(), st.Text())
			assert.Empty(t, srv.Unmatched())
			served := srv.Usage("")
			assert.Equal(t, served.InputTokens+served.OutputTokens+served.CacheReadInputTokens+served.CacheCreationInputTokens, st.Tokens,
				"the tokens Foreman read are exactly those served")
			if cli.name == realagent.Claude {
				assert.InDelta(t, claudeCost(t, srv.Requests()), st.CostUSD, 1e-9, "the cost Foreman read is the served tokens at Claude Code's price")
			} else {
				assert.Zero(t, st.CostUSD, "%s reports no cost", cli.name)
			}

			// Each stage's wall time (started to finished) against its
			// agents' processes; each story's (first stage started to
			// merged) against all of its agents'.
			type span struct{ from, to time.Time }
			stage := map[string]span{}
			story := map[foreman.ItemID]span{}
			for _, e := range tm.Events(0) {
				k := fmt.Sprintf("%s/%d", e.Story, e.Stage)
				switch e.Kind {
				case team.EventStageStarted:
					stage[k] = span{from: e.At}
					if _, ok := story[e.Story]; !ok {
						story[e.Story] = span{from: e.At}
					}
				case team.EventStageFinished:
					s := stage[k]
					s.to = e.At
					stage[k] = s
				case team.EventStoryMerged:
					s := story[e.Story]
					s.to = e.At
					story[e.Story] = s
				}
			}
			names := []string{"plan", "validate", "build", "quality gate"}
			shares := make([][]float64, len(names))
			walls := make([][]time.Duration, len(names))
			var storyShares []float64
			var storyWall, storyAgents time.Duration
			agentRuns := 0
			for _, s := range stories {
				for i := range names {
					sp := stage[fmt.Sprintf("%s/%d", s.ID, i)]
					wall := sp.to.Sub(sp.from)
					agent, _ := runs.within(sp.from, sp.to)
					walls[i] = append(walls[i], wall)
					shares[i] = append(shares[i], float64(wall-agent)/float64(wall))
				}
				sp := story[s.ID]
				agent, k := runs.within(sp.from, sp.to)
				agentRuns += k
				storyWall += sp.to.Sub(sp.from)
				storyAgents += agent
				storyShares = append(storyShares, float64(sp.to.Sub(sp.from)-agent)/float64(sp.to.Sub(sp.from)))
			}
			for i, name := range names {
				t.Logf("%s %-12s wall median %v, Foreman's share median %.1f%% (min %.1f%%, max %.1f%%) over %d",
					cli.name, name, median(walls[i]).Round(time.Millisecond), 100*medianF(shares[i]), 100*slices.Min(shares[i]),
					100*slices.Max(shares[i]), n)
			}
			t.Logf("%s story (first stage started to merged): %v wall, agents' processes %v (%d runs), Foreman's share %.1f%% "+
				"(median of %d stories %.1f%%); tokens %d = served, cost $%.6f",
				cli.name, storyWall.Round(time.Millisecond), storyAgents.Round(time.Millisecond), agentRuns,
				100*float64(storyWall-storyAgents)/float64(storyWall), n, 100*medianF(storyShares), st.Tokens, st.CostUSD)
		})
	}
}

func median(d []time.Duration) time.Duration {
	s := slices.Clone(d)
	slices.Sort(s)
	return s[len(s)/2]
}

func medianF(f []float64) float64 {
	s := slices.Clone(f)
	slices.Sort(s)
	return s[len(s)/2]
}
