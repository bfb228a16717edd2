package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
	"github.com/hashicorp/go-multierror"
)

// CommitReader reads a worktree's current commit, the evidence of progress
// a heartbeat carries. An error means "no evidence" and is not fatal.
type CommitReader interface {
	Head(ctx context.Context, dir string) (string, error)
}

// CommitReaderFunc adapts a function to CommitReader.
type CommitReaderFunc func(ctx context.Context, dir string) (string, error)

// Head calls f.
func (f CommitReaderFunc) Head(ctx context.Context, dir string) (string, error) { return f(ctx, dir) }

// NoCommits is a CommitReader that reads no commit: heartbeats then carry
// only the last output time. It is a constant, so no one can swap it for
// another reader behind every Runtime's back.
const NoCommits noCommits = 0

type noCommits uint8

// Head reads nothing.
func (noCommits) Head(context.Context, string) (string, error) { return "", nil }

type gitHead struct{ git gitexec.Runner }

// Head reads HEAD from the worktree's files when their layout is the plain
// one, and asks git otherwise: a heartbeat comes every few seconds per
// worker, and a git process costs milliseconds of CPU each time.
func (g *gitHead) Head(ctx context.Context, dir string) (string, error) {
	if l, ok := gitexec.ReadLayout(dir, g.git.Env); ok {
		if head, ok := gitexec.ReadHead(l); ok {
			return head, nil
		}
	}
	out, err := g.git.Run(ctx, dir, "rev-parse", "--verify", "--quiet", "HEAD")
	return strings.TrimSpace(out), err
}

// AgentFunc adapts a function to phases.AgentDriver, for in-process agents.
type AgentFunc func(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error)

// Execute calls f.
func (f AgentFunc) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	return f(ctx, req, onEvent)
}

// RuntimeConfig configures a Runtime; zero values mean the defaults.
type RuntimeConfig struct {
	// Agent runs each assignment. Required.
	Agent phases.AgentDriver
	// Commits reads the worktree's HEAD for every heartbeat. Default: what
	// git rev-parse HEAD prints, read from git's files when their layout is
	// the plain one (no process per heartbeat).
	Commits CommitReader
	// HeartbeatInterval is how often a working worker heartbeats. Default:
	// 10 s.
	HeartbeatInterval time.Duration
	// AgentTimeout bounds one execution. Default: none (zero: no bound
	// beyond KILL).
	AgentTimeout time.Duration
	// Clock paces the heartbeats. Default: the wall clock.
	Clock foreman.Clock
	// Logger receives the Runtime's logs. Default: none (nil discards
	// them).
	Logger *slog.Logger
	// OnEvent receives EventAgentStarted and EventAgentExited. Default:
	// none (nil: not called).
	OnEvent EventHook
	// Gate, when its Verifier is set, runs after every successful agent
	// execution; see Gate. Default: none (no gate).
	Gate Gate
	// NoEvidence turns off the evidence of work the Runtime keeps for
	// Evidence (a walk of the worktree's files at each run's start, new
	// commit and gate result), for a Runtime whose Evidence nobody asks
	// for: a pgtransport worker host's, since the transport carries no
	// evidence. Evidence then fails with ErrNoEvidence. Default: false
	// (kept).
	NoEvidence bool
}

// Runtime is the default, in-process Transport: each worker is a goroutine
// that supervises one agent execution per assignment through the
// phases.AgentDriver, in the assignment's worktree. The Runtime, not the
// agent, heartbeats every HeartbeatInterval, and each heartbeat carries the
// agent's last output time and the worktree's HEAD, so a heartbeat shows
// work, not uptime. The first line of output is reported as the running
// STATUS. A PROBE is answered with a StatusAlive STATUS while the
// execution runs. KILL, RESET and SHUTDOWN cancel the execution's context, which
// makes agentcmd terminate the agent's process group (SIGTERM, grace,
// SIGKILL); nothing of one assignment survives into the next.
type Runtime struct {
	cfg   RuntimeConfig
	inbox Inbox

	mu      sync.Mutex
	runs    map[foreman.WorkerID]*run // the current run of each worker
	live    []*run                    // runs whose goroutine has not ended, each at its liveAt
	closed  bool
	wg      sync.WaitGroup
	stopped chan struct{}
	// goroutines runs each run's supervisor and execution.
	goroutines *spawner
}

type run struct {
	a      Assignment
	rt     *Runtime
	ctx    context.Context // the run's: cancelled by cancel
	cancel context.CancelFunc
	// done is closed once the agent's execution has ended, with its
	// outcome in result (written before, by the execution's goroutine).
	done       chan struct{}
	result     execResult
	onEvent    phases.StreamCallback
	killed     atomic.Bool
	probed     chan struct{} // a pending probe; capacity 1
	lastOutput atomic.Int64
	running    atomic.Bool
	// Evidence of work: lines of output, the agent's pid (its process
	// group) and what had been done at the last mark (see Evidence).
	outputLines atomic.Int64
	pid         atomic.Int64
	markMu      sync.Mutex
	mark        evidenceMark
	lastCommit  string // read and written by the supervising goroutine only
	liveAt      int    // its index in Runtime.live (under Runtime.mu)
}

// NewRuntime returns a runtime delivering workers' messages to inbox.
func NewRuntime(cfg RuntimeConfig, inbox Inbox) *Runtime {
	if cfg.Commits == nil {
		cfg.Commits = &gitHead{}
	}
	if cfg.HeartbeatInterval <= 0 {
		cfg.HeartbeatInterval = health.DefaultHeartbeatInterval
	}
	if cfg.Clock == nil {
		cfg.Clock = foreman.RealClock()
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	return &Runtime{cfg: cfg, inbox: inbox, runs: map[foreman.WorkerID]*run{}, stopped: make(chan struct{}),
		goroutines: &spawner{}}
}

// Send carries out a command. It never blocks on the agent.
func (r *Runtime) Send(ctx context.Context, c Command) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return ErrStopped
	}
	cur := r.runs[c.Worker]
	switch c.Kind {
	case CommandAssign:
		if c.Assign == nil {
			return fmt.Errorf("%w: ASSIGN without an assignment", ErrInvalidMessage)
		}
		if cur != nil {
			r.stopLocked(c.Worker, cur) // per-assignment state never carries over
		}
		r.startLocked(*c.Assign)
	case CommandKill, CommandReset:
		if cur != nil && cur.a.ID == c.Assignment {
			r.stopLocked(c.Worker, cur)
		}
	case CommandShutdown:
		if cur != nil {
			r.stopLocked(c.Worker, cur)
		}
	case CommandProbe:
		// The supervising goroutine answers, so the answer shows that it,
		// not just this call, is alive. No run for the assignment means
		// no answer: the probe times out.
		if cur != nil && cur.a.ID == c.Assignment {
			select {
			case cur.probed <- struct{}{}:
			default: // one answer is already due
			}
		}
	default:
		return fmt.Errorf("%w: command %d", ErrInvalidMessage, c.Kind)
	}
	return nil
}

// dropLive takes rn out of r.live (the last run takes its place): no
// map, whose hashing costs more than a run's other bookkeeping. Called
// with r.mu held.
func (r *Runtime) dropLive(rn *run) {
	last := len(r.live) - 1
	moved := r.live[last]
	r.live[rn.liveAt], moved.liveAt = moved, rn.liveAt
	r.live[last] = nil
	r.live = r.live[:last]
}

func (r *Runtime) stopLocked(w foreman.WorkerID, cur *run) {
	cur.killed.Store(true)
	cur.cancel()
	delete(r.runs, w)
}

func (r *Runtime) startLocked(a Assignment) {
	ctx, cancel := context.WithCancel(context.Background())
	rn := &run{a: a, rt: r, ctx: ctx, cancel: cancel, done: make(chan struct{}), probed: make(chan struct{}, 1)}
	r.runs[a.Worker] = rn
	rn.liveAt = len(r.live)
	r.live = append(r.live, rn)
	r.wg.Add(1)
	r.goroutines.spawn(rn)
}

// do supervises the run (a run is its supervisor's task).
func (rn *run) do() { rn.rt.supervise(rn.ctx, rn) }

// runExecution is a run's agent execution as a task.
type runExecution struct{ rn *run }

func (e runExecution) do() {
	rn := e.rn
	rn.result = rn.rt.execute(rn.ctx, rn, rn.onEvent)
	close(rn.done)
}

func (r *Runtime) emit(ev Event) {
	if r.cfg.OnEvent != nil {
		r.cfg.OnEvent(ev)
	}
}

func (r *Runtime) deliver(ctx context.Context, m Message) {
	if _, err := r.inbox.Deliver(ctx, m); err != nil && !errors.Is(err, context.Canceled) {
		r.cfg.Logger.Warn("worker runtime: message not delivered", "worker", m.Worker,
			"assignment", m.Assignment, "message", m.Kind.String(), "error", err)
	}
}

func (r *Runtime) heartbeat(ctx context.Context, rn *run) {
	commit, err := r.cfg.Commits.Head(ctx, rn.a.Worktree)
	if err != nil {
		commit = ""
	}
	if ctx.Err() != nil {
		return
	}
	if commit != rn.lastCommit {
		if rn.lastCommit != "" {
			r.remark(rn) // a new commit is progress: evidence counts from here
		}
		rn.lastCommit = commit
	}
	m := Message{Kind: MsgHeartbeat, Worker: rn.a.Worker, Assignment: rn.a.ID, Commit: commit}
	if ns := rn.lastOutput.Load(); ns != 0 {
		m.LastOutput = time.Unix(0, ns)
	}
	r.deliver(ctx, m)
}

type execResult struct {
	res phases.AgentResult
	err error
	// usage is that of every execution of the assignment.
	usage Usage
	// gateErr says why the quality gate failed in its last round.
	gateErr string
}

// supervise runs one assignment: an immediate heartbeat (the commit it
// starts from), the agent, heartbeats until it ends, then the outcome.
func (r *Runtime) supervise(ctx context.Context, rn *run) {
	defer r.wg.Done()
	defer func() {
		r.mu.Lock()
		r.dropLive(rn)
		r.mu.Unlock()
	}()
	a := &rn.a // not a copy: the closures below would move one to the heap
	clk := r.cfg.Clock
	r.remark(rn)
	r.heartbeat(ctx, rn)
	r.emit(Event{Kind: EventAgentStarted, At: clk.Now(), Worker: a.Worker, Assignment: a.ID, Item: a.Item, Attempt: a.Attempt})
	rn.onEvent = func(ev phases.StreamEvent) {
		t := ev.Time
		if t.IsZero() {
			t = clk.Now()
		}
		rn.lastOutput.Store(t.UnixNano())
		rn.outputLines.Add(1)
		if !rn.running.Swap(true) && ctx.Err() == nil {
			r.deliver(ctx, Message{Kind: MsgStatus, Worker: a.Worker, Assignment: a.ID, Status: StatusRunning})
		}
	}
	r.goroutines.spawn(runExecution{rn})
	ticker := clk.NewTicker(r.cfg.HeartbeatInterval)
	defer ticker.Stop()
	for {
		select {
		case <-ticker.C():
			r.heartbeat(ctx, rn)
		case <-rn.probed:
			r.deliver(ctx, Message{Kind: MsgStatus, Worker: a.Worker, Assignment: a.ID, Status: StatusAlive})
		case <-rn.done:
			r.finish(rn, rn.result)
			return
		}
	}
}

func agentRequest(rn *run, timeout time.Duration) phases.AgentRequest {
	a := rn.a
	prompt := a.Prompt
	if a.MemoryContext != "" {
		prompt += "\n\n## Context from earlier attempts\n\n" + a.MemoryContext
	}
	return phases.AgentRequest{
		WorkspacePath: a.Worktree, TaskPrompt: prompt, Feedback: a.Feedback,
		Iteration: a.Attempt, Timeout: timeout,
		OnStart: func(pid int) { rn.pid.Store(int64(pid)) },
	}
}

func (r *Runtime) finish(rn *run, out execResult) {
	a := rn.a
	res := out.res
	reason := exitReason(res, out.err)
	if out.gateErr != "" {
		reason = out.gateErr
	}
	r.emit(Event{Kind: EventAgentExited, At: r.cfg.Clock.Now(), Worker: a.Worker, Assignment: a.ID, Item: a.Item,
		Reason: reason, Usage: out.usage, Err: out.err})
	r.mu.Lock()
	if r.runs[a.Worker] == rn {
		delete(r.runs, a.Worker)
	}
	r.mu.Unlock()
	if rn.killed.Load() {
		return // the Dispatcher ended this assignment; it expects nothing more
	}
	m := Message{Worker: a.Worker, Assignment: a.ID, Usage: out.usage}
	switch {
	case out.err == nil && !res.Success && res.RateLimit != nil:
		m.Kind, m.ResetsAt, m.Reason = MsgRateLimited, res.RateLimit.ResetsAt, orDefault(res.RateLimit.Message, reason)
	case out.err == nil && WaitingForPerson(res) != "":
		m.Kind, m.Question = MsgNeedsPerson, WaitingForPerson(res)
	case out.err != nil || !res.Success || out.gateErr != "":
		m.Kind, m.Reason = MsgFailed, reason
	case a.RequireReview:
		m.Kind = MsgReadyForReview
	default:
		m.Kind = MsgDone
	}
	r.deliver(context.Background(), m)
}

func exitReason(res phases.AgentResult, err error) string {
	var reason string
	switch {
	case res.Signal != "":
		reason = "killed by " + res.Signal
	case res.TimedOut:
		reason = "timed out"
	case err != nil:
		return err.Error()
	case res.Error != "":
		return fmt.Sprintf("exit %d: %s", res.ExitCode, res.Error)
	case res.ExitCode == 0:
		return "exit 0" // nearly every run's: no allocation
	default:
		return "exit " + strconv.Itoa(res.ExitCode) // no fmt
	}
	if err != nil {
		reason += " (" + err.Error() + ")"
	}
	return reason
}

// Close stops every worker: running agents are cancelled (their process
// groups terminated) and Close waits for them until ctx ends. Once they
// have ended, the goroutines the Runtime keeps for its next runs end too.
// The error, a *multierror.Error of *StopError, names every worker still
// running then. Safe to call more than once.
func (r *Runtime) Close(ctx context.Context) error {
	r.mu.Lock()
	if !r.closed {
		r.closed = true
		go func() { r.wg.Wait(); r.goroutines.close(); close(r.stopped) }()
	}
	for w, rn := range r.runs {
		r.stopLocked(w, rn)
	}
	r.mu.Unlock()
	select {
	case <-r.stopped:
		return nil
	case <-ctx.Done():
	}
	var errs *multierror.Error
	r.mu.Lock()
	for _, rn := range r.live {
		errs = multierror.Append(errs, &StopError{Worker: rn.a.Worker, Assignment: rn.a.ID, Err: ctx.Err()})
	}
	r.mu.Unlock()
	return errs.ErrorOrNil()
}

// WaitingForPerson says what an agent's result leaves for a person: the
// questions it asked and got no answer to, and, when the run did not
// succeed, the permissions it was refused (an agent that succeeded
// anyway found another way). Empty when nothing waits for a person. The
// Runtime escalates a non-empty one as NEEDS_PERSON.
func WaitingForPerson(res phases.AgentResult) string {
	var lines []string
	for _, q := range res.Questions {
		lines = append(lines, q.Text)
	}
	if !res.Success {
		for _, d := range res.PermissionDenials {
			lines = append(lines, "Permission refused: "+d.Tool+" "+d.Input)
		}
	}
	return strings.Join(lines, "\n")
}

func orDefault(s, def string) string {
	if s == "" {
		return def
	}
	return s
}
