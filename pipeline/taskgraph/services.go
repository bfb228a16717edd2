package taskgraph

import (
	"context"
	"fmt"
	"io"

	foreman "github.com/agentforeman/foreman"
)

// What a Runtime calls out to, apart from the Runtime itself (runtime.go):
// the Spawner that starts a task's worker, the Reporter that receives the
// coordinator's output, their function adapters, TextReporter, and the
// default worker prompt.

//go:generate go tool mockgen -destination taskgraphmock/mocks.go -package taskgraphmock github.com/agentforeman/foreman/pipeline/taskgraph Spawner,Reporter

// Spawner starts a worker for a task. Spawn must be idempotent by
// req.Assignment: the runtime re-issues a spawn whose completion it did
// not record (a crash between spawning and saving), and a second call
// for the same assignment must not start a second worker.
type Spawner interface {
	Spawn(ctx context.Context, req SpawnRequest) error
}

// SpawnerFunc adapts a function to Spawner.
type SpawnerFunc func(ctx context.Context, req SpawnRequest) error

// Spawn calls f.
func (f SpawnerFunc) Spawn(ctx context.Context, req SpawnRequest) error { return f(ctx, req) }

// SpawnRequest is one worker to start in the background for one task.
type SpawnRequest struct {
	Session     string
	Team        string
	Task        string
	Role        string
	Description string
	Assignment  foreman.AssignmentID
	// Prompt is the worker's instructions (Config.Prompt).
	Prompt string
}

// Reporter receives the coordinator's output: reports for the person
// (EffectReport), team log entries (EffectLog) and acknowledgements
// (EffectAck). Effects may be re-issued after a restart; Effect.Key
// identifies repeats.
type Reporter interface {
	Report(ctx context.Context, session string, e Effect) error
}

// ReporterFunc adapts a function to Reporter.
type ReporterFunc func(ctx context.Context, session string, e Effect) error

// Report calls f.
func (f ReporterFunc) Report(ctx context.Context, session string, e Effect) error {
	return f(ctx, session, e)
}

// TextReporter writes the text of every EffectReport to w, one block per
// effect; logs and acknowledgements are left to the runtime's logger.
func TextReporter(w io.Writer) Reporter {
	return ReporterFunc(func(_ context.Context, _ string, e Effect) error {
		if e.Kind != EffectReport {
			return nil
		}
		text := e.Text()
		if len(text) == 0 || text[len(text)-1] != '\n' {
			text += "\n"
		}
		_, err := io.WriteString(w, text)
		return err
	})
}

// DefaultPrompt is the default worker prompt: the role, the one task, the
// session, and the rules a worker follows (its own tasks only, "[role]" tag
// on every message, report to the coordinator with the assignment id).
func DefaultPrompt(req SpawnRequest) string {
	return fmt.Sprintf(`You are the %[1]s of team %[2]q.

Task: %[3]s - %[4]s
Session: %[5]s
Assignment: %[6]s

Rules:
- Work only on %[3]s; do not take over other roles' tasks or create tasks for them.
- Prefix every message with [%[1]s] and talk only to the coordinator.
- When done, report "[%[1]s] %[3]s completed" (or "failed", with the reason), quoting assignment %[6]s.`,
		req.Role, req.Team, req.Task, req.Description, req.Session, req.Assignment)
}
