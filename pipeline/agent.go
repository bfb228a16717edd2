package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/message"
)

// Inbox takes what workers say and what becomes of them; *Runtime is one.
type Inbox interface {
	Deliver(ctx context.Context, item foreman.ItemID, env message.Envelope) (State, error)
	Handle(ctx context.Context, item foreman.ItemID, ev Event) (State, error)
}

// AgentSpawnerConfig configures an AgentSpawner. Agent, Workspace and Inbox
// are required.
type AgentSpawnerConfig struct {
	// Agent runs one assignment (for example an agentcmd.Driver).
	Agent phases.AgentDriver
	// Workspace returns the item's worktree (merge.Manager.Path).
	Workspace func(item foreman.ItemID) (string, error)
	// Prompt renders the stage's task; default DefaultPrompt.
	Prompt func(r SpawnRequest) string
	// Checkpoints, when set, lets a Resume spawn continue the crashed
	// agent's session or add the CHECKPOINT RESUME block.
	Checkpoints health.CheckpointLoader
	// Inbox receives each agent's report (the last canonical line of its
	// final message) and, for an agent that ended without one, EventIdle.
	Inbox  Inbox
	Clock  foreman.Clock
	Logger *slog.Logger
}

// DefaultPrompt is the seed's one command per worker, "Execute Stage {N}
// for {id}", with the readiness score and the previous round's feedback.
func DefaultPrompt(r SpawnRequest) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Execute Stage %d for %s", r.Stage, r.Item)
	if r.Title != "" {
		fmt.Fprintf(&b, " (%s)", r.Title)
	}
	b.WriteString(".\n")
	if r.Readiness != "" {
		fmt.Fprintf(&b, "Readiness: %s.\n", r.Readiness)
	}
	if r.Feedback != "" {
		fmt.Fprintf(&b, "Previous round: %s\n", r.Feedback)
	}
	return b.String()
}

// AgentSpawner is a Spawner and Messenger that runs each assignment as one
// execution of a phases.AgentDriver in the item's worktree, in a goroutine
// it owns, and hands the agent's report to the Inbox when it ends. A
// shutdown request cancels the execution; a probe is answered for the
// agent: a running one is EXECUTING, a finished one is idle. It is
// idempotent by assignment within the process; after a coordinator restart
// an assignment whose agent was lost with the process is run again.
type AgentSpawner struct {
	cfg     AgentSpawnerConfig
	mu      sync.Mutex
	running map[foreman.AssignmentID]context.CancelFunc
	seen    map[foreman.AssignmentID]bool
	closed  bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup
}

// ErrSpawnerClosed is returned by Spawn after Close.
var ErrSpawnerClosed = errors.New("pipeline: spawner closed")

// NewAgentSpawner checks cfg and returns a spawner. Close it to stop its agents.
func NewAgentSpawner(cfg AgentSpawnerConfig) (*AgentSpawner, error) {
	if cfg.Agent == nil || cfg.Workspace == nil || cfg.Inbox == nil {
		return nil, errors.New("pipeline: AgentSpawnerConfig needs Agent, Workspace and Inbox")
	}
	if cfg.Prompt == nil {
		cfg.Prompt = DefaultPrompt
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	ctx, cancel := context.WithCancel(context.Background())
	return &AgentSpawner{cfg: cfg, running: map[foreman.AssignmentID]context.CancelFunc{},
		seen: map[foreman.AssignmentID]bool{}, ctx: ctx, cancel: cancel}, nil
}

// Spawn implements Spawner.
func (a *AgentSpawner) Spawn(ctx context.Context, r SpawnRequest) error {
	dir, err := a.cfg.Workspace(r.Item)
	if err != nil {
		return err
	}
	req := phases.AgentRequest{WorkspacePath: dir, TaskPrompt: a.cfg.Prompt(r), Feedback: r.Feedback}
	if r.Resume && a.cfg.Checkpoints != nil {
		cp, err := a.cfg.Checkpoints.LoadCheckpoint(ctx, r.Item)
		switch {
		case err == nil && cp.AgentSession != "":
			req.SessionID = cp.AgentSession
		case err == nil:
			req.TaskPrompt += "\n" + health.RenderResume(cp)
		case !errors.Is(err, health.ErrNoCheckpoint):
			return err
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return ErrSpawnerClosed
	}
	if a.seen[r.Assignment] {
		return nil
	}
	a.seen[r.Assignment] = true
	runCtx, cancel := context.WithCancel(a.ctx)
	a.running[r.Assignment] = cancel
	a.wg.Add(1)
	go a.run(runCtx, r, req)
	return nil
}

func (a *AgentSpawner) run(ctx context.Context, r SpawnRequest, req phases.AgentRequest) {
	defer a.wg.Done()
	res, err := a.cfg.Agent.Execute(ctx, req, nil)
	a.mu.Lock()
	delete(a.running, r.Assignment)
	a.mu.Unlock()
	if ctx.Err() != nil {
		return // shut down or closed: nobody waits for this agent
	}
	log := logger(a.cfg.Logger)
	if line, ok := reportLineOf(r.Item, res.Result); ok {
		env, perr := message.Open(r.Worker, r.Assignment, line, a.cfg.Clock.Now())
		if perr == nil || env.Body == nil {
			if _, err := a.cfg.Inbox.Deliver(a.ctx, r.Item, env); err != nil {
				log.Warn("pipeline: delivering report", "item", r.Item, "assignment", r.Assignment, "err", err)
			}
			return
		}
	}
	log.Info("pipeline: agent ended without a report", "item", r.Item, "assignment", r.Assignment,
		"err", err, "exit", res.ExitCode)
	a.idle(r.Item, r.Worker, r.Assignment)
}

func (a *AgentSpawner) idle(item foreman.ItemID, w foreman.WorkerID, as foreman.AssignmentID) {
	if _, err := a.cfg.Inbox.Handle(a.ctx, item, Event{Kind: EventIdle, Worker: w, Assignment: as}); err != nil {
		logger(a.cfg.Logger).Warn("pipeline: reporting idle", "item", item, "assignment", as, "err", err)
	}
}

// reportLineOf finds the last line of text that is a worker's canonical
// message about item; agents like to say more than the line.
func reportLineOf(item foreman.ItemID, text string) (string, bool) {
	lines := strings.Split(strings.TrimSpace(text), "\n")
	for i := len(lines) - 1; i >= 0; i-- {
		m, err := message.Parse(lines[i])
		if err == nil && m.Kind().FromWorker() && m.ItemID() == item {
			return lines[i], true
		}
	}
	return "", false
}

// Send implements Messenger: a shutdown cancels the assignment's agent, a
// probe is answered from whether the agent still runs, and an ACK needs no
// delivery (the agent's execution already ended with its report). Answers
// go to the Inbox from a goroutine, since Send runs inside the Inbox's own
// handling of the item.
func (a *AgentSpawner) Send(_ context.Context, m Outgoing) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	cancel, running := a.running[m.Assignment]
	switch m.Kind {
	case EffectShutdown:
		if running {
			cancel()
		}
	case EffectProbe:
		if a.closed {
			return ErrSpawnerClosed
		}
		a.wg.Add(1)
		go func() {
			defer a.wg.Done()
			if !running {
				a.idle(m.Item, m.Worker, m.Assignment)
				return
			}
			if _, err := a.cfg.Inbox.Handle(a.ctx, m.Item, Event{Kind: EventStatusReply, Worker: m.Worker,
				Assignment: m.Assignment, Stage: m.Stage}); err != nil {
				logger(a.cfg.Logger).Warn("pipeline: answering probe", "item", m.Item, "err", err)
			}
		}()
	}
	return nil
}

// Running reports how many agents are running.
func (a *AgentSpawner) Running() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.running)
}

// Close cancels every agent and waits for their goroutines. It is safe to
// call twice.
func (a *AgentSpawner) Close() error {
	a.mu.Lock()
	a.closed = true
	a.mu.Unlock()
	a.cancel()
	a.wg.Wait()
	return nil
}
