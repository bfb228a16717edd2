package agentcmd

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/internal/proc"
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
}

var _ phases.AgentDriver = (*Driver)(nil)

// New returns a driver for cfg, with cfg's zero fields set to their defaults.
// Configuration mistakes (unknown Format, no command) are reported by
// Execute.
func New(cfg Config) *Driver {
	return &Driver{cfg: cfg.withDefaults(), totals: newSessionTotals()}
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
	inv, err := d.invocation(req)
	if err != nil {
		return phases.AgentResult{}, err
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
	p, err := d.start(inv, req.WorkspacePath)
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
	return p.supervise(ctx, timeout, newParser(), onEvent)
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
}

func (d *Driver) start(inv invocation, dir string) (*process, error) {
	cmd := exec.Command(inv.argv[0], inv.argv[1:]...)
	cmd.Dir = dir
	cmd.Env = inv.env
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}

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
	d.cfg.Logger.Debug("agent started", "argv0", inv.argv[0], "pid", cmd.Process.Pid, "workspace", dir)
	return &process{
		d: d, cmd: cmd, pgid: cmd.Process.Pid, started: started,
		stdout: outR, stderr: errR, stdin: inW, prompt: inv.stdin,
	}, nil
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
			ev := phases.StreamEvent{Time: cfg.Clock.Now(), Line: l.text}
			if l.stderr {
				errOut.addLine(l.text)
				ev.Kind, ev.Text = phases.StreamStderr, l.text
			} else {
				out.addLine(l.text)
				ev.Kind, ev.Text = parser.ParseLine(l.text)
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
				if proc.GroupAlive(p.pgid) {
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
	res.TimedOut = timedOut
	if stopped {
		res.Success = false
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

func (p *process) signalGroup(sig syscall.Signal) { p.d.signalGroup(p.pgid, sig) }

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
	if sum.CumulativeTokens {
		res.Tokens = p.d.totals.charge(p.session, res.SessionID, sum.Tokens)
	}
	ps := p.cmd.ProcessState
	res.ExitCode = ps.ExitCode()
	if ws, ok := ps.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		res.Signal = signalName(ws.Signal())
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

// signalName names the common signals the way a reader expects them.
func signalName(sig syscall.Signal) string {
	switch sig {
	case syscall.SIGTERM:
		return "SIGTERM"
	case syscall.SIGKILL:
		return "SIGKILL"
	case syscall.SIGINT:
		return "SIGINT"
	case syscall.SIGHUP:
		return "SIGHUP"
	case syscall.SIGQUIT:
		return "SIGQUIT"
	case syscall.SIGABRT:
		return "SIGABRT"
	case syscall.SIGSEGV:
		return "SIGSEGV"
	case syscall.SIGBUS:
		return "SIGBUS"
	case syscall.SIGPIPE:
		return "SIGPIPE"
	case syscall.SIGUSR1:
		return "SIGUSR1"
	case syscall.SIGUSR2:
		return "SIGUSR2"
	}
	return sig.String()
}
