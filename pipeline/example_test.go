package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

// The pure core: a story through StoryFlow, one event at a time, with the
// effects each transition asks for. No I/O happens here.
func ExampleFlow_Step() {
	f := pipeline.StoryFlow(pipeline.StoryConfig{})
	now := time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)
	show := func(s pipeline.State, effs []pipeline.Effect) {
		fmt.Printf("%s stage %d worker %s:", s.Status, s.Stage, s.Worker)
		for _, e := range effs {
			fmt.Printf(" %s", e.Kind)
		}
		fmt.Println()
	}
	s, effs, _ := f.Step(pipeline.State{Item: "PROJ-42"}, pipeline.Event{Kind: pipeline.EventStart}, now)
	show(s, effs)

	// The planner reports; the board (re-read by the runtime) shows tasks.
	report := pipeline.Event{Kind: pipeline.EventReport, Worker: s.Worker, Assignment: s.Assignment,
		Stage: 0, Outcome: pipeline.Complete, Tasks: 3, Score: "4",
		Board: &pipeline.BoardStory{Found: true, Status: "Backlog", Tasks: 3}}
	s, effs, _ = f.Step(s, report, now.Add(time.Minute))
	show(s, effs)
	fmt.Println(effs[0].Text())

	// The same report again: a duplicate, re-ACKed and not reprocessed.
	s, effs, _ = f.Step(s, report, now.Add(2*time.Minute))
	show(s, effs)
	fmt.Println("duplicates:", s.Duplicates)

	// A report from a worker that does not hold the item: stale, ignored.
	s, effs, _ = f.Step(s, pipeline.Event{Kind: pipeline.EventReport, Worker: "story-PROJ-42-s7",
		Assignment: "old", Stage: 1, Outcome: pipeline.Go}, now.Add(3*time.Minute))
	show(s, effs)
	fmt.Println("stale:", s.Stale)

	// Output:
	// ACTIVE stage 0 worker story-PROJ-42-s0: create-worktree spawn
	// ACTIVE stage 1 worker story-PROJ-42-s1: ack shutdown spawn
	// ACK Stage 0 for PROJ-42
	// ACTIVE stage 1 worker story-PROJ-42-s1: ack
	// duplicates: 1
	// ACTIVE stage 1 worker story-PROJ-42-s1:
	// stale: 1
}

// localWorktrees stands in for Git (a merge.Manager) in this example.
type localWorktrees struct{}

func (localWorktrees) CreateWorktree(context.Context, foreman.ItemID) error { return nil }
func (localWorktrees) RemoveWorktree(context.Context, foreman.ItemID) error { return nil }
func (localWorktrees) Merge(_ context.Context, r pipeline.MergeRequest) (pipeline.MergeOutcome, error) {
	return pipeline.MergeOutcome{Commit: "c0ffee"}, nil
}

// The runtime: every transition is persisted with its effects before they
// run. Workers here are functions that update the board when spawned; the
// messages they send are delivered as the story flow's canonical lines.
func ExampleRuntime() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "pipeline-example")
	defer os.RemoveAll(dir)
	board := pipeline.NewFileBoard(filepath.Join(dir, "kanban.json"))
	spawner := pipeline.SpawnerFunc(func(ctx context.Context, r pipeline.SpawnRequest) error {
		fmt.Printf("spawn %s (%s)\n", r.Worker, r.StageName)
		switch r.Stage {
		case 0:
			return board.AddTasks(ctx, r.Item, "T1", "T2")
		case 1:
			return board.SetStatus(ctx, r.Item, pipeline.BoardTodo)
		case 2:
			return board.SetStatus(ctx, r.Item, pipeline.BoardToReview)
		}
		return nil
	})
	messenger := pipeline.MessengerFunc(func(_ context.Context, m pipeline.Outgoing) error {
		if m.Kind == pipeline.EffectAck {
			fmt.Println(m.Text)
		}
		return nil
	})
	rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{
		Store: store.NewMemory(store.MemoryOptions{}), Spawner: spawner, Messenger: messenger,
		Worktrees: localWorktrees{}, Merger: localWorktrees{}, Board: board,
		Reporter: &pipeline.FileReporter{Root: dir},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	st, _ := rt.Start(ctx, "PROJ-42", "Login form")
	for _, line := range []string{
		"Stage 0 COMPLETE for PROJ-42. 2 tasks created. Plan score: 4/4.",
		"Stage 1 COMPLETE for PROJ-42. Verdict: GO. Readiness: 8.",
		"Stage 2 COMPLETE for PROJ-42. All tasks Done. Story set to To Review.",
		"Stage 3 COMPLETE for PROJ-42. Verdict: PASS. Quality Score: 92/100.",
	} {
		env, _ := message.Open(st.Worker, st.Assignment, line, time.Now())
		if st, err = rt.Deliver(ctx, "PROJ-42", env); err != nil {
			fmt.Println(err)
			return
		}
	}
	b, _ := board.Story(ctx, "PROJ-42")
	fmt.Println(st.Status, st.Commit, b.Status)
	// Output:
	// spawn story-PROJ-42-s0 (plan)
	// ACK Stage 0 for PROJ-42
	// spawn story-PROJ-42-s1 (validate)
	// ACK Stage 1 for PROJ-42
	// spawn story-PROJ-42-s2 (execute)
	// ACK Stage 2 for PROJ-42
	// spawn story-PROJ-42-s3 (quality)
	// ACK Stage 3 for PROJ-42
	// DONE c0ffee Done
}
