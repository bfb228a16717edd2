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
// unusable (ErrNoCommand, ErrUnknownFormat, a proxy variable it cannot
// read: *ProxyURLError), the lease could not be taken
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
	// No proxy's credentials reach the agent: a local proxy adds them
	// (proxycreds.go), until the agent is gone.
	env, stopProxies, err := d.proxyEnv(ctx, inv.env, bwrap != "" && d.cfg.Sandbox.UnshareNet)
	if err != nil {
		return phases.AgentResult{}, err
	}
	defer stopProxies()
	inv.env = env
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
