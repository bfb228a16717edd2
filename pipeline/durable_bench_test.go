package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/store"
)

func openStore(b *testing.B, kind string) store.Store {
	if kind == "memory" {
		return store.NewMemory(store.MemoryOptions{})
	}
	s, err := sqlitestore.Open(context.Background(), filepath.Join(b.TempDir(), "state.db"), sqlitestore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { s.Close() })
	return s
}

// storyEvents is one story's worth of core events after Start: four
// reports and the merge result.
func storyEvents(s pipeline.State, i int) pipeline.Event {
	outcomes := [...]pipeline.Outcome{pipeline.Complete, pipeline.Go, pipeline.Complete, pipeline.Pass}
	benchScores := [...]string{"4", "9", "", "92"}
	boards := [...]*pipeline.BoardStory{{Found: true, Tasks: 1}, {Found: true, Status: pipeline.BoardTodo},
		{Found: true, Status: pipeline.BoardToReview}, nil}
	if i == 4 {
		return pipeline.Event{Kind: pipeline.EventMerged, Commit: "c"}
	}
	return pipeline.Event{Kind: pipeline.EventReport, Worker: s.Worker, Assignment: s.Assignment,
		Stage: i, Outcome: outcomes[i], Score: benchScores[i], Board: boards[i]}
}

// BenchmarkDurableTransitions persists core transitions (state plus its
// effects, as the Runtime's record) on Memory and on SQLite: one Apply per
// transition, and batched (64 items' transitions per Apply). transitions/s
// is the figure; Memory is the baseline in the same run.
func BenchmarkDurableTransitions(b *testing.B) {
	f := pipeline.StoryFlow(pipeline.StoryConfig{})
	now := time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)
	for _, kind := range []string{"memory", "sqlite"} {
		for _, batch := range []int{1, 64} {
			b.Run(fmt.Sprintf("store=%s/batch=%d", kind, batch), func(b *testing.B) {
				st := openStore(b, kind)
				ctx := context.Background()
				states := make([]pipeline.State, batch)
				versions := make([]int64, batch)
				steps := make([]int, batch)
				ops := make([]store.Op, batch)
				n := 0
				// effs is reused: each transition's effects are marshalled
				// before the next step.
				var effs []pipeline.Effect
				for i := range states {
					states[i] = pipeline.State{Item: foreman.ItemID("P-" + strconv.Itoa(i))}
				}
				b.ResetTimer()
				for n < b.N {
					for i := range states {
						var ev pipeline.Event
						if steps[i] == 0 {
							ev = pipeline.Event{Kind: pipeline.EventStart}
						} else {
							ev = storyEvents(states[i], steps[i]-1)
						}
						next, out, err := f.AppendStep(effs[:0], states[i], ev, now)
						if err != nil {
							b.Fatal(err)
						}
						data, _ := json.Marshal(struct {
							State   pipeline.State
							Pending []pipeline.Effect
						}{next, out})
						effs = out
						ops[i] = store.Op{Kind: "item", ID: string(next.Item), ExpectVersion: versions[i], Data: data}
						states[i] = next
						if steps[i]++; steps[i] == 6 { // story done: start over
							states[i], steps[i] = pipeline.State{Item: next.Item}, 0
						}
					}
					recs, err := st.Apply(ctx, ops...)
					if err != nil {
						b.Fatal(err)
					}
					for i, r := range recs {
						versions[i] = r.Version
						if steps[i] == 0 { // a new story reuses the record
							ops[i].ExpectVersion = r.Version
						}
					}
					n += batch
				}
				b.StopTimer()
				b.ReportMetric(float64(n)/b.Elapsed().Seconds(), "transitions/s")
			})
		}
	}
}

type nopWorld struct{}

func (nopWorld) Spawn(context.Context, pipeline.SpawnRequest) error       { return nil }
func (nopWorld) Send(context.Context, pipeline.Outgoing) error            { return nil }
func (nopWorld) CreateWorktree(context.Context, foreman.ItemID) error     { return nil }
func (nopWorld) RemoveWorktree(context.Context, foreman.ItemID) error     { return nil }
func (nopWorld) SetStatus(context.Context, foreman.ItemID, string) error  { return nil }
func (nopWorld) AppendReport(context.Context, pipeline.ReportEntry) error { return nil }
func (nopWorld) Escalate(context.Context, pipeline.Escalation) error      { return nil }
func (nopWorld) Story(_ context.Context, _ foreman.ItemID) (pipeline.BoardStory, error) {
	return pipeline.BoardStory{Found: true, Tasks: 1, Status: statusNow}, nil
}
func (nopWorld) Merge(context.Context, pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return pipeline.MergeOutcome{Commit: "c"}, nil
}

var statusNow = ""

// BenchmarkRuntimeStory runs whole stories through the Runtime with
// services that do nothing, so that the store is what is measured: each
// story is 6 transitions and 17 effects in 7 writes
// (TestRuntimeWritesPerStory checks the count). stories/s and writes/s are the figures.
func BenchmarkRuntimeStory(b *testing.B) {
	for _, kind := range []string{"memory", "sqlite"} {
		b.Run("store="+kind, func(b *testing.B) {
			w := nopWorld{}
			rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: openStore(b, kind), Spawner: w, Messenger: w,
				Worktrees: w, Merger: w, Board: w, Escalator: w, Reporter: w})
			if err != nil {
				b.Fatal(err)
			}
			ctx := context.Background()
			lines := []string{
				"Stage 0 COMPLETE for %s. 2 tasks created. Plan score: 4/4.",
				"Stage 1 COMPLETE for %s. Verdict: GO. Readiness: 8.",
				"Stage 2 COMPLETE for %s. All tasks Done. Story set to To Review.",
				"Stage 3 COMPLETE for %s. Verdict: PASS. Quality Score: 92/100.",
			}
			statuses := []string{"", pipeline.BoardTodo, pipeline.BoardToReview, ""}
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				id := foreman.ItemID("S-" + strconv.Itoa(i))
				st, err := rt.Start(ctx, id, "")
				if err != nil {
					b.Fatal(err)
				}
				for stage, l := range lines {
					statusNow = statuses[stage]
					env, _ := message.Open(st.Worker, st.Assignment, fmt.Sprintf(l, id), time.Time{})
					if st, err = rt.Deliver(ctx, id, env); err != nil {
						b.Fatal(err)
					}
				}
				if st.Status != pipeline.StatusDone {
					b.Fatal(st.Status)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "stories/s")
			b.ReportMetric(float64(rt.Stats().Transitions)/b.Elapsed().Seconds(), "writes/s")
		})
	}
}
