package agentcmd

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/phases"
)

// Driver runs an agent CLI as a subprocess. It implements
// phases.AgentDriver and is safe for concurrent use: each Execute runs its
// own process.
type Driver struct {
	cfg Config
	// totals holds the running token totals of the sessions this driver
	// ran, for agents that report usage cumulatively.
	totals *sessionTotals
	// leaseLocks serializes executions per workspace when leases are on.
	leaseLocks leaseLocks
	// probe remembers whether the OS sandbox works here.
	probe *sandboxProbe
	// noDecoys hides every directory with a read-only tmpfs, as without a
	// LeaseDir (BenchmarkSandboxDecoys compares).
	noDecoys bool
	// noOpenWatch leaves the open watch out (openwatch_linux.go), for
	// benchmarks.
	noOpenWatch bool
	// swept: the leftovers of gone processes were removed (leftovers.go).
	swept *sync.Once
}

var _ phases.AgentDriver = (*Driver)(nil)

// New returns a driver for cfg, with cfg's zero fields set to their defaults.
// Configuration mistakes (unknown Format, no command) are reported by
// Execute.
func New(cfg Config) *Driver {
	return &Driver{cfg: cfg.withDefaults(), totals: newSessionTotals(), probe: &sandboxProbe{}, swept: &sync.Once{}}
}

// derive returns a new Driver for cfg that shares d's sandbox probe.
func (d *Driver) derive(cfg Config) *Driver {
	n := New(cfg)
	if cfg.Sandbox.Bwrap == d.cfg.Sandbox.Bwrap {
		n.probe = d.probe
	}
	return n
}

// Execute runs the agent once in req.WorkspacePath and waits for it, and for
// every process it left in its process group, to finish.
//
// The agent runs in a process group of its own. When the timeout
// (req.Timeout, else Config.Timeout) expires or ctx ends, the whole group
// gets SIGTERM, then SIGKILL after Config.KillGrace. When the agent exits on
// its own, any process it left behind still holding its output gets the same
// treatment, and whatever else remains in its group is killed.
//
// With Config.LeaseDir set, Execute first takes the workspace's lease and
// kills an orphaned agent group a dead host left running there (see
// Config.LeaseDir); it records the new agent in the lease until its group is
// gone.
//
// An agent that fails, exits non-zero, times out or reports an error is a
// result with Success false, not an error. The error is for system faults:
// the agent could not be started (*StartError), the configuration is
// unusable (ErrNoCommand, ErrUnknownFormat), the lease could not be taken
// or kept (ErrLeaseHeld, *OrphanError, file system errors), or ctx ended;
// in the last case the partial result is returned with it.
func (d *Driver) Execute(ctx context.Context, req phases.AgentRequest, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	if err := ctx.Err(); err != nil {
		return phases.AgentResult{}, fmt.Errorf("agentcmd: not started: %w", err)
	}
	if err := d.cfg.Sandbox.check(); err != nil {
		return phases.AgentResult{}, err
	}
	d.sweepLeftovers()
	bwrap, err := d.sandboxBwrap()
	if err != nil {
		return phases.AgentResult{}, err
	}
	var home string
	if bwrap != "" {
		if home, err = d.agentHome(req.WorkspacePath); err != nil {
			return phases.AgentResult{}, &SandboxError{Stage: "prepare", Err: err}
		}
		if d.cfg.Sandbox.HomeDir == "" && d.cfg.LeaseDir == "" {
			defer func() { _ = os.RemoveAll(home) }()
		}
	}
	inv, err := d.invocation(req, agentHOME(home))
	if err != nil {
		return phases.AgentResult{}, err
	}
	if bwrap != "" {
		inv.env = d.withGitIdentity(ctx, req.WorkspacePath, inv.env)
	}
	if inv.cleanup != nil {
		defer inv.cleanup()
	}
	newParser := d.cfg.NewParser
	if newParser == nil {
		ad, _ := adapterFor(d.cfg.Format) // invocation has validated the format
		newParser = ad.newParser
	}
	var lease *workspaceLease
	if d.cfg.LeaseDir != "" {
		if lease, err = d.acquireLease(ctx, req.WorkspacePath); err != nil {
			return phases.AgentResult{}, err
		}
		defer lease.release()
		if err := lease.reapOrphan(ctx); err != nil {
			return phases.AgentResult{}, err
		}
		if err := lease.reapUnleased(ctx); err != nil {
			return phases.AgentResult{}, err
		}
	}
	var sb *sandboxRun
	if bwrap != "" {
		// After the reaping: the branch's ref is copied for the agent now.
		if sb, err = d.sandbox(ctx, bwrap, req, &inv, home); err != nil {
			return phases.AgentResult{}, err
		}
		defer sb.cleanup()
	}
	p, err := d.start(inv, req.WorkspacePath, sb != nil)
	if err != nil {
		return phases.AgentResult{}, err
	}
	if req.OnStart != nil {
		req.OnStart(p.cmd.Process.Pid)
	}
	if lease != nil {
		if err := lease.record(p, inv.env); err != nil {
			p.abort()
			return phases.AgentResult{}, err
		}
		// After supervise, which returns once the group has been waited
		// for and killed; before release (deferred earlier, run later).
		defer lease.remove()
	}
	p.session = req.SessionID
	timeout := req.Timeout
	if timeout <= 0 {
		timeout = d.cfg.Timeout
	}
	res, err := p.supervise(ctx, timeout, newParser(), onEvent)
	if sb != nil {
		d.afterSandbox(ctx, sb, req.WorkspacePath, onEvent)
	}
	return res, err
}

// process is one running agent and the driver's ends of its pipes.
type process struct {
	d       *Driver
	cmd     *exec.Cmd
	pgid    int
	started time.Time
	stdout  *os.File
	stderr  *os.File
	stdin   *os.File // nil unless the prompt goes to stdin
	prompt  string
	session string // the session the agent was asked to resume
	// sandboxed: the group's leader is bwrap, the agent runs inside it;
	// status brings bwrap's JSON status records once it is gone.
	sandboxed bool
	status    chan []byte
}

// statusFD is the descriptor bwrap writes its JSON status records to.
const statusFD = 3

func (d *Driver) start(inv invocation, dir string, sandboxed bool) (*process, error) {
	cmd := exec.Command(inv.argv[0], inv.argv[1:]...)
	cmd.Dir = dir
	cmd.Env = inv.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if sandboxed {
		// A session of its own: the same process group, and no
		// controlling terminal an agent could push input into (TIOCSTI).
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	}

	var toClose []*os.File
	closeAll := func() {
		for _, f := range toClose {
			_ = f.Close()
		}
	}
	pipe := func() (r, w *os.File, err error) {
		r, w, err = os.Pipe()
		if err == nil {
			toClose = append(toClose, r, w)
		}
		return r, w, err
	}
	outR, outW, err := pipe()
	if err != nil {
		return nil, &StartError{Argv0: inv.argv[0], Err: err}
	}
	errR, errW, err := pipe()
	if err != nil {
		closeAll()
		return nil, &StartError{Argv0: inv.argv[0], Err: err}
	}
	cmd.Stdout, cmd.Stderr = outW, errW
	var inR, inW *os.File
	if inv.useStdin {
		if inR, inW, err = pipe(); err != nil {
			closeAll()
			return nil, &StartError{Argv0: inv.argv[0], Err: err}
		}
		cmd.Stdin = inR
	}
	var statR, statW *os.File
	if sandboxed {
		if statR, statW, err = pipe(); err != nil {
			closeAll()
			return nil, &StartError{Argv0: inv.argv[0], Err: err}
		}
		cmd.ExtraFiles = []*os.File{statW} // statusFD
	}

	started := d.cfg.Clock.Now()
	if err := cmd.Start(); err != nil {
		closeAll()
		return nil, &StartError{Argv0: inv.argv[0], Dir: dir, Err: err}
	}
	// The child has its copies; holding ours would keep the pipes open.
	_ = outW.Close()
	_ = errW.Close()
	if inR != nil {
		_ = inR.Close()
	}
	p := &process{
		d: d, cmd: cmd, pgid: cmd.Process.Pid, started: started,
		stdout: outR, stderr: errR, stdin: inW, prompt: inv.stdin, sandboxed: sandboxed,
	}
	if statR != nil {
		_ = statW.Close()
		p.status = make(chan []byte, 1)
		go func() {
			// bwrap keeps the descriptor to itself: EOF once it is gone.
			data, _ := io.ReadAll(io.LimitReader(statR, 1<<16))
			_ = statR.Close()
			p.status <- data
		}()
	}
	d.cfg.Logger.Debug("agent started", "argv0", inv.argv[0], "pid", cmd.Process.Pid, "workspace", dir, "sandboxed", sandboxed)
	return p, nil
}

// Termination stages, each entered from the one before.
const (
	stageRunning    = iota
	stageTermSent   // SIGTERM sent to the group; grace timer armed
	stageKillSent   // SIGKILL sent; grace timer armed for the pipes to close
	stagePipesGiven // pipes closed by the driver: a holder escaped the group
	stageDraining   // the agent and its group are gone; grace timer armed for the last output
)

// supervise streams the agent's output, enforces the timeout and ctx, and
// returns once the agent has been reaped and its output pipes are closed.
func (p *process) supervise(ctx context.Context, timeout time.Duration, parser OutputParser, onEvent phases.StreamCallback) (phases.AgentResult, error) {
	cfg := p.d.cfg
	lines := make(chan outputLine, 64)
	go readLines(p.stdout, false, cfg.MaxLineBytes, lines)
	go readLines(p.stderr, true, cfg.MaxLineBytes, lines)

	stdinDone := make(chan struct{})
	if p.stdin != nil {
		go func() {
			defer close(stdinDone)
			// An agent that never reads its stdin fails this write with
			// EPIPE or, once the driver closes the pipe, ErrClosed.
			_, _ = p.stdin.WriteString(p.prompt)
			_ = p.stdin.Close()
		}()
	} else {
		close(stdinDone)
	}

	waited := make(chan error, 1)
	go func() { waited <- p.cmd.Wait() }()

	var timeoutC <-chan time.Time
	if timeout > 0 {
		t := cfg.Clock.NewTimer(timeout)
		defer t.Stop()
		timeoutC = t.C()
	}
	var grace interface{ Stop() bool }
	var graceC <-chan time.Time
	defer func() {
		if grace != nil {
			grace.Stop()
		}
	}()

	stage := stageRunning
	escalate := func(reason string) {
		switch stage {
		case stageRunning:
			cfg.Logger.Info("terminating agent process group", "pgid", p.pgid, "reason", reason, "signal", "SIGTERM")
			p.signalGroup(syscall.SIGTERM)
			stage = stageTermSent
		case stageTermSent:
			cfg.Logger.Warn("killing agent process group", "pgid", p.pgid, "reason", reason, "signal", "SIGKILL")
			p.signalGroup(syscall.SIGKILL)
			stage = stageKillSent
		case stageKillSent, stageDraining:
			cfg.Logger.Warn("abandoning agent output pipes held by a process outside its group", "pgid", p.pgid, "reason", reason)
			_ = p.stdout.Close()
			_ = p.stderr.Close()
			stage = stagePipesGiven
			return
		default:
			return
		}
		t := cfg.Clock.NewTimer(cfg.KillGrace)
		grace, graceC = t, t.C()
	}

	var (
		out, errOut       = newTail(cfg.OutputLimit), newTail(cfg.StderrLimit)
		eofs              int
		exited            bool
		timedOut, stopped bool
		stopReason        string
		announced         bool
		printed           int64
		ctxErr            error
		ctxDone           = ctx.Done()
	)
	for !exited || eofs < 2 {
		select {
		case l := <-lines:
			if l.eof {
				eofs++
				continue
			}
			if printed += int64(len(l.text)) + 1; cfg.MaxOutputBytes > 0 && printed > cfg.MaxOutputBytes {
				if stage == stageRunning && !exited && stopReason == "" {
					stopReason, stopped = fmt.Sprintf("the agent printed more than %s (Config.MaxOutputBytes): an output flood",
						byteSize(cfg.MaxOutputBytes)), true
					escalate("output flood")
					if onEvent != nil {
						line := "agentcmd: output: stopped the agent: it printed more than " + byteSize(cfg.MaxOutputBytes) +
							" (Config.MaxOutputBytes), a flood; the rest is not read"
						onEvent(phases.StreamEvent{Time: cfg.Clock.Now(), Kind: phases.StreamSandbox, Line: line, Text: line})
					}
				}
				continue // past the bound: neither parsed nor kept
			}
			ev := phases.StreamEvent{Time: cfg.Clock.Now(), Line: l.text}
			if l.stderr {
				errOut.addLine(l.text)
				ev.Kind, ev.Text = phases.StreamStderr, l.text
				if sp, ok := parser.(stderrParser); ok {
					if k, text, ok := sp.parseStderr(l.text); ok {
						ev.Kind, ev.Text = k, text
					}
				}
			} else {
				out.addLine(l.text)
				ev.Kind, ev.Text = parser.ParseLine(l.text)
				if !announced {
					ev.SessionID, announced = sessionNamed(parser, p.d.cfg.Format)
				}
				if st, ok := parser.(stopper); ok && stage == stageRunning && !exited && stopReason == "" {
					if why := st.stopNow(); why != "" {
						stopReason, stopped = why, true
						escalate(why)
					}
				}
			}
			if onEvent != nil {
				onEvent(ev)
			}
		case <-timeoutC:
			timeoutC = nil
			if stage == stageRunning && !exited {
				timedOut, stopped = true, true
				escalate(fmt.Sprintf("timeout %s", timeout))
			}
		case <-ctxDone:
			ctxDone = nil
			if stage == stageRunning && !exited {
				ctxErr, stopped = ctx.Err(), true
				escalate("context: " + ctx.Err().Error())
			}
		case <-graceC:
			graceC = nil
			escalate("grace period over")
		case <-waited:
			exited = true
			if eofs < 2 && stage == stageRunning {
				if p.groupRunning() {
					// The agent is gone but something it started still
					// holds its output.
					escalate("agent exited leaving processes holding its output")
					break
				}
				// The whole group is gone: the ends of its output are
				// usually still on their way to the readers. A grace
				// period for them; a holder that left the group (setsid)
				// is given up on after it.
				stage = stageDraining
				t := cfg.Clock.NewTimer(cfg.KillGrace)
				grace, graceC = t, t.C()
			}
		}
	}
	// Whatever is left of the group (processes that let go of the output)
	// goes too. The group id cannot be reused while any member lives, so
	// this cannot reach an unrelated process unless the group emptied in the
	// instant since the agent was reaped and a new group took its number.
	p.signalGroup(syscall.SIGKILL)
	if p.stdin != nil {
		_ = p.stdin.Close()
	}
	<-stdinDone
	_ = p.stdout.Close()
	_ = p.stderr.Close()

	res := p.result(parser.Summary())
	res.Output, res.Stderr = out.String(), errOut.String()
	if !stopped && p.sandboxSetupFailed(cfg) {
		// bwrap's own failure, before the agent ran: a fault, not a result.
		res.Success = false
		return res, &SandboxError{Stage: "bwrap", Detail: bwrapMessage(res.Stderr)}
	}
	res.TimedOut = timedOut
	if stopped {
		res.Success = false
	}
	if stopReason != "" {
		res.Error = "stopped at once: " + stopReason
	}
	cfg.Logger.Debug("agent finished", "pid", p.pgid, "exit_code", res.ExitCode, "signal", res.Signal,
		"timed_out", res.TimedOut, "success", res.Success, "duration", res.Duration)
	if ctxErr != nil {
		return res, fmt.Errorf("agentcmd: agent stopped: %w", ctxErr)
	}
	return res, nil
}

// abort kills an agent that must not run after all and reaps it.
func (p *process) abort() {
	p.signalGroup(syscall.SIGKILL)
	for _, f := range []*os.File{p.stdin, p.stdout, p.stderr} {
		if f != nil {
			_ = f.Close()
		}
	}
	_ = p.cmd.Wait()
}

// result fills in what the process state and the parsed output say.
func (p *process) result(sum Summary) phases.AgentResult {
	res := phases.AgentResult{
		SessionID: sum.SessionID,
		Result:    sum.Result,
		Tokens:    sum.Tokens,
		CostUSD:   sum.CostUSD,
		Model:     sum.Model,
		Duration:  p.d.cfg.Clock.Since(p.started),
	}
	if res.SessionID == "" {
		// The agent still has the session it was asked to resume when its
		// output did not name another.
		res.SessionID = p.session
	}
	if sum.CumulativeTokens || sum.CumulativeCost {
		tokens, cost := p.d.totals.charge(p.session, res.SessionID, sessionSpend{sum.Tokens, sum.CostUSD})
		if sum.CumulativeTokens {
			res.Tokens = tokens
		}
		if sum.CumulativeCost {
			res.CostUSD = cost
		}
	}
	if res.SessionID != "" && checkSessionID(p.d.cfg.Format, res.SessionID) != nil {
		// Never handed to a --resume: the next run starts afresh.
		p.d.cfg.Logger.Warn("agent reported an invalid session id; dropped", "session", truncate(res.SessionID, 80))
		res.SessionID = ""
	}
	ps := p.cmd.ProcessState
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = signalName(ws.Signal())
	} else if p.sandboxed && res.ExitCode > 128 && res.ExitCode <= 128+64 {
		// bwrap exits 128+n for an agent killed by signal n.
		res.Signal, res.ExitCode = signalName(syscall.Signal(res.ExitCode-128)), -1
	}
	res.Success = ps.Success() && sum.AgentError == ""
	res.Error = sum.AgentError
	res.APIError, res.PermissionDenials, res.Questions = sum.APIError, sum.PermissionDenials, sum.Questions
	if rl := sum.RateLimit; rl != nil {
		c := *rl
		if c.ResetsAt.IsZero() {
			if t, ok := resolveReset(c.Message, p.d.cfg.Clock.Now()); ok {
				c.ResetsAt = t
			}
		}
		res.RateLimit = &c
	}
	return res
}
