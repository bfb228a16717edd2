package pipeline

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/internal/spawnrules"
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
	// Agent runs one assignment (for example an agentcmd.Driver). Required.
	Agent phases.AgentDriver
	// Workspace returns the item's worktree (merge.Manager.Path). Required.
	Workspace func(item foreman.ItemID) (string, error)
	// Prompt renders the stage's task. Default: DefaultPrompt.
	Prompt func(r SpawnRequest) string
	// Checkpoints, when set, lets a Resume spawn continue the crashed
	// agent's session or add the CHECKPOINT RESUME block. Default: none
	// (nil: a Resume spawn gets the plain prompt and a fresh session).
	Checkpoints health.CheckpointLoader
	// Inbox receives each agent's report (a ReportingAgent's typed one,
	// else the last canonical line of its final message, else of its
	// output) and, for an agent that ended without one, EventIdle.
	// Required.
	Inbox Inbox
	// Timeouts bound each execution by stage. Default: none (the zero
	// value: no limit beyond cancellation).
	Timeouts StageTimeouts
	// Clock stamps the envelope of each report handed to Inbox. Default:
	// the wall clock.
	Clock foreman.Clock
	// Logger receives a record per agent that ended without a report and
	// per report, event or probe answer that could not be delivered.
	// Default: none (nil discards them).
	Logger *slog.Logger
}

// StageTimeouts bounds agent executions: Stages[n] for stage n when it is
// positive, else Default; zero means no limit beyond cancellation. An agent
// that runs out of time ends without a report, so the crash protocol probes
// it and gives the stage to a fresh worker within the crash budget.
type StageTimeouts struct {
	Default time.Duration
	Stages  map[int]time.Duration
}

// For returns the limit for stage (zero: none).
func (t StageTimeouts) For(stage int) time.Duration {
	if d := t.Stages[stage]; d > 0 {
		return d
	}
	return max(t.Default, 0)
}

// The assignment block: AgentSpawner and DispatcherSpawner end every prompt
// with these lines (AssignmentBlock), so the agent knows what it works on
// and who it is, and a driver that wraps the agent can read them back
// (ParseAssignment).
const (
	HeaderItem       = "Foreman-Item"
	HeaderStage      = "Foreman-Stage"
	HeaderWorker     = "Foreman-Worker"
	HeaderAssignment = "Foreman-Assignment"
)

// The assignment's environment: AgentSpawner and DispatcherSpawner also put
// the assignment block's values in phases.AgentRequest.Env
// (AssignmentEnv), so that an agent process and the tools it runs read
// them without parsing the prompt (agentcmd adds them to the process
// environment).
const (
	EnvItem       = "FOREMAN_ITEM"
	EnvStage      = "FOREMAN_STAGE"
	EnvWorker     = "FOREMAN_WORKER"
	EnvAssignment = "FOREMAN_ASSIGNMENT"
)

// AgentAssignment is what the assignment block says.
type AgentAssignment struct {
	Item       foreman.ItemID
	Stage      int
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
}

// AssignmentBlock renders r's assignment block: a blank line, then one
// "Key: value" line each for the item, stage, worker and assignment.
func AssignmentBlock(r SpawnRequest) string {
	return fmt.Sprintf("\n%s: %s\n%s: %d\n%s: %s\n%s: %s\n", HeaderItem, r.Item, HeaderStage, r.Stage,
		HeaderWorker, r.Worker, HeaderAssignment, r.Assignment)
}

// AssignmentEnv returns r's assignment as KEY=VALUE entries for
// phases.AgentRequest.Env: EnvItem, EnvStage, EnvWorker and EnvAssignment.
func AssignmentEnv(r SpawnRequest) []string {
	return []string{
		EnvItem + "=" + string(r.Item),
		EnvStage + "=" + strconv.Itoa(r.Stage),
		EnvWorker + "=" + string(r.Worker),
		EnvAssignment + "=" + string(r.Assignment),
	}
}

// ParseAssignment reads the assignment block back from a prompt; the last
// occurrence of each line wins (the block comes last). ok is false when the
// prompt has no assignment line. The values are copies, not slices of
// prompt: whoever keeps them (an MCP server's token of the assignment, a
// record) does not keep the whole prompt alive with them.
func ParseAssignment(prompt string) (a AgentAssignment, ok bool) {
	for line := range strings.Lines(prompt) {
		key, val, found := strings.Cut(strings.TrimSpace(line), ": ")
		if !found {
			continue
		}
		switch key {
		case HeaderItem:
			a.Item = foreman.ItemID(strings.Clone(val))
		case HeaderStage:
			if n, err := strconv.Atoi(val); err == nil {
				a.Stage = n
			}
		case HeaderWorker:
			a.Worker = foreman.WorkerID(strings.Clone(val))
		case HeaderAssignment:
			a.Assignment, ok = foreman.AssignmentID(strings.Clone(val)), val != ""
		}
	}
	return a, ok
}

// agentTask renders the prompt of r's agent and, for a worker replacing a
// crashed one, the session to resume (from its checkpoint) or the
// CHECKPOINT RESUME block; the assignment block ends the prompt.
func agentTask(ctx context.Context, prompt func(SpawnRequest) string, cps health.CheckpointLoader, r SpawnRequest) (task, session string, err error) {
	task = prompt(r)
	if r.Resume && cps != nil {
		cp, err := cps.LoadCheckpoint(ctx, r.Item)
		switch {
		case err == nil && cp.AgentSession != "":
			session = cp.AgentSession
		case err == nil:
			task += "\n" + health.RenderResume(cp)
		case !errors.Is(err, health.ErrNoCheckpoint):
			return "", "", err
		}
	}
	return task + AssignmentBlock(r), session, nil
}

// ReportingAgent is an agent that hands its report over as a typed message
// (a message.Report, for one) instead of a line in its output: an
// AgentSpawner or DispatcherSpawner whose agent is one takes the report as
// it is and parses nothing, so that a stage runner in the coordinator's
// process never formats a verdict to have it parsed back. report is nil
// when the agent ended without one; a report that is no worker's message
// about the assignment's item is dropped (the agent ended without a
// report). Its Execute is what an agent in another process runs, and
// prints the report's line (message.Line) as its final message.
type ReportingAgent interface {
	phases.AgentDriver
	ExecuteReport(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (res phases.AgentResult, report message.Message, err error)
}

// agentReport is an agent's report, typed, with the line it came from (or
// the line that says it, for a ReportingAgent's).
type agentReport struct {
	msg message.Message
	raw string
}

// execute runs one assignment of agent and finds its report on item: the
// typed one of a ReportingAgent, else the last canonical line of its final
// message, else (a plain-text agent has none: agentcmd's text format
// leaves Result empty) of its output, parsed once here, at the boundary.
func execute(ctx context.Context, agent phases.AgentDriver, item foreman.ItemID, req phases.AgentRequest,
	onEvent phases.StreamCallback) (phases.AgentResult, agentReport, error) {
	if ra, ok := agent.(ReportingAgent); ok {
		res, m, err := ra.ExecuteReport(ctx, req, onEvent)
		if m == nil || !m.Kind().FromWorker() || m.ItemID() != item {
			return res, agentReport{}, err
		}
		return res, agentReport{msg: m, raw: message.Line(m)}, err
	}
	res, err := agent.Execute(ctx, req, onEvent)
	rep, ok := reportLineOf(item, res.Result)
	if !ok {
		rep, _ = reportLineOf(item, res.Output)
	}
	return res, rep, err
}

// report hands the agent's report to inbox, or EventIdle when it has none.
func report(ctx context.Context, inbox Inbox, log *slog.Logger, now time.Time, r SpawnRequest, rep agentReport) {
	env, ok, err := spawnrules.Envelope(r.Worker, r.Assignment, rep.msg, rep.raw, now)
	if ok {
		if _, err := inbox.Deliver(ctx, r.Item, env); err != nil {
			log.Warn("pipeline: delivering report", "item", r.Item, "assignment", r.Assignment, "err", err)
		}
		return
	}
	if err != nil {
		log.Warn("pipeline: a report under an invalid assignment", "item", r.Item, "assignment", r.Assignment, "err", err)
	}
	if _, err := inbox.Handle(ctx, r.Item, Event{Kind: EventIdle, Worker: r.Worker, Assignment: r.Assignment}); err != nil {
		log.Warn("pipeline: reporting idle", "item", r.Item, "assignment", r.Assignment, "err", err)
	}
}

// DefaultPrompt is the one command each worker gets, "Execute Stage {N}
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

// Spawn implements Spawner. The agent's prompt is Prompt's text followed
// by the assignment block (AssignmentBlock); the request's Env carries the
// same values (AssignmentEnv).
func (a *AgentSpawner) Spawn(ctx context.Context, r SpawnRequest) error {
	dir, err := a.cfg.Workspace(r.Item)
	if err != nil {
		return err
	}
	task, session, err := agentTask(ctx, a.cfg.Prompt, a.cfg.Checkpoints, r)
	if err != nil {
		return err
	}
	req := phases.AgentRequest{WorkspacePath: dir, TaskPrompt: task, Feedback: r.Feedback, SessionID: session,
		Timeout: a.cfg.Timeouts.For(r.Stage), Env: AssignmentEnv(r)}
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
	if req.Timeout > 0 {
		runCtx, cancel = context.WithTimeout(a.ctx, req.Timeout)
	}
	a.running[r.Assignment] = cancel
	a.wg.Add(1)
	go a.run(runCtx, r, req)
	return nil
}

func (a *AgentSpawner) run(ctx context.Context, r SpawnRequest, req phases.AgentRequest) {
	defer a.wg.Done()
	res, rep, err := execute(ctx, a.cfg.Agent, r.Item, req, nil)
	a.mu.Lock()
	cancel := a.running[r.Assignment]
	delete(a.running, r.Assignment)
	a.mu.Unlock()
	if a.ctx.Err() != nil || (ctx.Err() != nil && !errors.Is(ctx.Err(), context.DeadlineExceeded)) {
		return // shut down or closed: nobody waits for this agent
	}
	if cancel != nil {
		cancel()
	}
	log := logger(a.cfg.Logger)
	if rep.msg == nil {
		log.Info("pipeline: agent ended without a report", "item", r.Item, "assignment", r.Assignment,
			"err", err, "exit", res.ExitCode, "timedOut", ctx.Err() != nil)
	}
	report(a.ctx, a.cfg.Inbox, log, a.cfg.Clock.Now(), r, rep)
}

func (a *AgentSpawner) idle(item foreman.ItemID, w foreman.WorkerID, as foreman.AssignmentID) {
	if _, err := a.cfg.Inbox.Handle(a.ctx, item, Event{Kind: EventIdle, Worker: w, Assignment: as}); err != nil {
		logger(a.cfg.Logger).Warn("pipeline: reporting idle", "item", item, "assignment", as, "err", err)
	}
}

// reportLineOf finds the last line of text that is a worker's canonical
// message about item, parsed; agents like to say more than the line.
func reportLineOf(item foreman.ItemID, text string) (agentReport, bool) {
	m, raw, ok := spawnrules.ReportOf(item, text)
	return agentReport{msg: m, raw: raw}, ok
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
