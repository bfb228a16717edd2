package pipeline_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/worker"
)

// A FileBoard is the kanban board in one JSON file: what a Stage 0 worker
// writes, and what the coordinator re-reads to check its claims.
func ExampleFileBoard() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "board")
	defer os.RemoveAll(dir)
	board := pipeline.NewFileBoard(filepath.Join(dir, "kanban.json"))

	_ = board.Put(ctx, "PROJ-42", pipeline.BoardEntry{Title: "Login form", Status: "Backlog"})
	_ = board.AddTasks(ctx, "PROJ-42", "form", "validation", "tests")
	_ = board.SetStatus(ctx, "PROJ-42", pipeline.BoardTodo)
	s, _ := board.Story(ctx, "PROJ-42")
	fmt.Printf("found=%v status=%s tasks=%d\n", s.Found, s.Status, s.Tasks)
	missing, _ := board.Story(ctx, "PROJ-43")
	fmt.Println("PROJ-43 found:", missing.Found)
	// Output:
	// found=true status=Todo tasks=3
	// PROJ-43 found: false
}

// A FileReporter appends each item's section to the day's report once,
// however often the effect is re-issued.
func ExampleFileReporter() {
	ctx := context.Background()
	root, _ := os.MkdirTemp("", "report")
	defer os.RemoveAll(root)
	start := time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)
	st := pipeline.State{Item: "PROJ-42", Title: "Login form", Status: pipeline.StatusDone, Started: start,
		Commit: "1a2b3c4", Stages: []pipeline.StageRecord{
			{Start: start, End: start.Add(1500 * time.Millisecond), Result: "3 tasks, 4/4"},
			{Start: start.Add(2 * time.Second), End: start.Add(2*time.Second + 250*time.Millisecond), Result: "GO, 8"},
			{Start: start.Add(3 * time.Second), End: start.Add(2 * time.Minute), Result: "Done"},
			{Start: start.Add(2 * time.Minute), End: start.Add(3 * time.Minute), Result: "PASS 92/100"},
		}}
	fr := &pipeline.FileReporter{Root: root}
	e := pipeline.ReportEntry{Key: "PROJ-42/7/1/append-report", Flow: pipeline.StoryFlow(pipeline.StoryConfig{}), State: st}
	_ = fr.AppendReport(ctx, e)
	_ = fr.AppendReport(ctx, e) // a re-issued effect: not appended twice
	path := fr.Path(start)
	data, _ := os.ReadFile(path)
	rel, _ := filepath.Rel(root, path)
	fmt.Println(rel)
	fmt.Print(string(data))
	// Output:
	// docs/tasks/reports/pipeline-2026-03-09.md
	// # Pipeline report 2026-03-09
	//
	// <!-- foreman-report PROJ-42/7/1/append-report -->
	// ### PROJ-42: Login form — DONE
	//
	// | Stage | Result | Started | Duration | Details |
	// |-------|--------|---------|----------|---------|
	// | 0 | 3 tasks, 4/4 | 2026-03-09T10:00:00Z | 1.5s |  |
	// | 1 | GO, 8 | 2026-03-09T10:00:02Z | 250ms | retries: 0 |
	// | 2 | Done | 2026-03-09T10:00:03Z | 1m57s | rework cycles: 0 |
	// | 3 | PASS 92/100 | 2026-03-09T10:02:00Z | 1m0s | crashes: 0 |
	//
	// - **Commit:** 1a2b3c4
	// - **Problems:** None
}

// printingInbox prints what an AgentSpawner hands the coordinator.
type printingInbox struct{ done chan struct{} }

func (p printingInbox) Deliver(_ context.Context, item foreman.ItemID, env message.Envelope) (pipeline.State, error) {
	fmt.Printf("report from %s on %s: %s\n", env.Sender, env.Assignment, message.Format(env.Body))
	close(p.done)
	return pipeline.State{}, nil
}

func (p printingInbox) Handle(_ context.Context, item foreman.ItemID, ev pipeline.Event) (pipeline.State, error) {
	fmt.Printf("%s from %s\n", ev.Kind, ev.Worker)
	close(p.done)
	return pipeline.State{}, nil
}

// An AgentSpawner runs each assignment as one agent execution in the
// item's worktree and hands the agent's report to the coordinator. The
// agent here is in-process and plain-text (no final message): it reads its
// assignment from the block that ends its prompt and ends its output with
// the report line.
func ExampleAgentSpawner() {
	agent := worker.AgentFunc(func(_ context.Context, req phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
		a, _ := pipeline.ParseAssignment(req.TaskPrompt)
		first, _, _ := strings.Cut(req.TaskPrompt, "\n")
		fmt.Printf("%s runs %q in %s\n", a.Worker, first, req.WorkspacePath)
		line := message.Format(message.Stage0Complete{Item: a.Item, Tasks: 3, PlanScore: 4})
		return phases.AgentResult{Success: true, Output: "planning...\n" + line + "\n"}, nil
	})
	inbox := printingInbox{done: make(chan struct{})}
	sp, err := pipeline.NewAgentSpawner(pipeline.AgentSpawnerConfig{Agent: agent, Inbox: inbox,
		Workspace: func(item foreman.ItemID) (string, error) { return "/worktrees/" + string(item), nil },
		Timeouts:  pipeline.StageTimeouts{Default: 30 * time.Minute}})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer sp.Close()
	_ = sp.Spawn(context.Background(), pipeline.SpawnRequest{Item: "PROJ-42", Title: "Login form", Stage: 0,
		Worker: "story-PROJ-42-s0", Assignment: "PROJ-42-a1"})
	<-inbox.done
	// Output:
	// story-PROJ-42-s0 runs "Execute Stage 0 for PROJ-42 (Login form)." in /worktrees/PROJ-42
	// report from story-PROJ-42-s0 on PROJ-42-a1: Stage 0 COMPLETE for PROJ-42. 3 tasks created. Plan score: 4/4.
}
