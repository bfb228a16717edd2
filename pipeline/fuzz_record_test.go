package pipeline_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// quiet is every service of a Runtime doing nothing: a merge lands at once.
type quiet struct{}

func (quiet) Spawn(context.Context, pipeline.SpawnRequest) error       { return nil }
func (quiet) Send(context.Context, pipeline.Outgoing) error            { return nil }
func (quiet) CreateWorktree(context.Context, foreman.ItemID) error     { return nil }
func (quiet) RemoveWorktree(context.Context, foreman.ItemID) error     { return nil }
func (quiet) Escalate(context.Context, pipeline.Escalation) error      { return nil }
func (quiet) AppendReport(context.Context, pipeline.ReportEntry) error { return nil }
func (quiet) SetStatus(context.Context, foreman.ItemID, string) error  { return nil }
func (quiet) Story(context.Context, foreman.ItemID) (pipeline.BoardStory, error) {
	return pipeline.BoardStory{Found: true, Status: pipeline.BoardToReview, Tasks: 3}, nil
}
func (quiet) Merge(context.Context, pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return pipeline.MergeOutcome{Commit: "0123abcd"}, nil
}

func quietRuntime(t testing.TB, st store.Store) *pipeline.Runtime {
	t.Helper()
	rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: st, Spawner: quiet{}, Messenger: quiet{},
		Worktrees: quiet{}, Merger: quiet{}, Board: quiet{}, Escalator: quiet{}, Reporter: quiet{},
		Clock: foreman.NewFakeClock(time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC))})
	if err != nil {
		t.Fatal(err)
	}
	return rt
}

// recordSeeds are item records as a Runtime writes them: after the start,
// after each stage report of a story, once DONE.
func recordSeeds(f *testing.F) [][]byte {
	ctx := context.Background()
	st := store.NewMemory(store.MemoryOptions{})
	rt := quietRuntime(f, st)
	var seeds [][]byte
	keep := func() {
		rec, err := st.Get(ctx, pipeline.RecordKind, string(id))
		if err != nil {
			f.Fatal(err)
		}
		seeds = append(seeds, rec.Data)
	}
	s, err := rt.Start(ctx, id, "Login form")
	if err != nil {
		f.Fatal(err)
	}
	keep()
	for _, line := range []string{
		"Stage 0 COMPLETE for PROJ-7. 3 tasks created. Plan score: 4/4.",
		"Stage 1 COMPLETE for PROJ-7. Verdict: GO. Readiness: 8.",
		"Stage 2 COMPLETE for PROJ-7. All tasks Done. Story set to To Review.",
		"Stage 3 COMPLETE for PROJ-7. Verdict: FAIL. Quality Score: 40/100. Issues: no tests",
	} {
		env, _ := message.Open(s.Worker, s.Assignment, line, time.Time{})
		if s, err = rt.Deliver(ctx, id, env); err != nil {
			f.Fatal(err)
		}
		keep()
	}
	return seeds
}

// FuzzItemRecord stores arbitrary bytes as an item's record: reading it
// either gives a state or an error matching ErrCorruptRecord, and a state
// that was read survives what a restarted coordinator does with it (a
// worker's report, Recover, Settle) without a panic.
func FuzzItemRecord(f *testing.F) {
	for _, seed := range recordSeeds(f) {
		f.Add(seed, "Stage 2 COMPLETE for PROJ-7. All tasks Done. Story set to To Review.")
	}
	f.Add([]byte(`{"format":1,"state":{"item":"PROJ-7","status":"ACTIVE","stage":9,"worker":"w","assignment":"a"}}`),
		"Stage 9 COMPLETE for PROJ-7. All tasks Done. Story set to To Review.")
	f.Add([]byte(`{"format":1,"state":{"item":"PROJ-7","status":"ACTIVE","stage":-1,"worker":"w","assignment":"a"}}`), "Stage 0 ERROR for PROJ-7: x")
	f.Add([]byte(`{"format":2,"state":{"item":"PROJ-7"}}`), "")
	f.Add([]byte(`{"format":1,"state":{"item":"OTHER"}}`), "")
	f.Add([]byte(`{"format":1,"state":{"item":"PROJ-7","status":"MERGING"},"pending":[{"kind":"merge","item":"PROJ-7","stage":7}]}`), "")
	f.Add([]byte(`null`), "")
	f.Add([]byte(`{`), "")
	f.Fuzz(func(t *testing.T, data []byte, line string) {
		ctx := context.Background()
		st := store.NewMemory(store.MemoryOptions{})
		if _, err := st.Apply(ctx, store.Op{Kind: pipeline.RecordKind, ID: string(id), Data: data}); err != nil {
			t.Skip() // not a record the store holds
		}
		rt := quietRuntime(t, st)
		s, err := rt.Get(ctx, id)
		if err != nil {
			if !errors.Is(err, pipeline.ErrCorruptRecord) {
				t.Fatalf("Get of %q: %v, want ErrCorruptRecord", data, err)
			}
			return
		}
		if s.Item != id {
			t.Fatalf("Get of %q read item %q", data, s.Item)
		}
		if _, err := json.Marshal(s); err != nil {
			t.Fatalf("a state read from %q does not encode again: %v", data, err)
		}
		env, _ := message.Open(s.Worker, s.Assignment, line, time.Time{})
		_, _ = rt.Deliver(ctx, id, env)
		_ = quietRuntime(t, st).Recover(ctx)
		_, _ = rt.Settle(ctx, id)
	})
}
