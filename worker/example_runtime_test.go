package worker_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

// The default Runtime runs each assignment through a phases.AgentDriver
// (agentcmd.New for a real agent CLI; here an in-process function) and
// heartbeats on its behalf. SlogEvents logs the lifecycle.
func Example_runtime() {
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		on(phases.StreamEvent{Kind: phases.StreamText, Line: "editing " + req.WorkspacePath})
		res := phases.AgentResult{Success: true, CostUSD: 0.02}
		res.Tokens.Input, res.Tokens.Output = 1200, 300
		return res, nil
	})
	done := make(chan worker.Event, 1)
	logger := slog.New(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{
		Level:       slog.LevelWarn,
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr { return dropTime(a) },
	}))
	logEvents := worker.SlogEvents(logger)
	d, err := worker.New(worker.Config{
		Agent:   agent,
		Commits: worker.NoCommits, // a real worktree would report git HEAD
		OnEvent: func(e worker.Event) {
			logEvents(e)
			if e.Kind == worker.EventCompleted {
				done <- e
			}
		},
	})
	if err != nil {
		panic(err)
	}
	_ = d.Submit(context.Background(), worker.Item{ID: "task-1", Prompt: "fix the bug", Worktree: os.TempDir()})
	e := <-done
	fmt.Printf("%s completed on attempt %d using %d tokens, $%.2f\n", e.Item, e.Attempt, e.Usage.Tokens, e.Usage.CostUSD)
	fmt.Println(d.Close())
	// Output:
	// task-1 completed on attempt 1 using 1500 tokens, $0.02
	// <nil>
}

func dropTime(a slog.Attr) slog.Attr {
	if a.Key == slog.TimeKey {
		return slog.Attr{}
	}
	return a
}
