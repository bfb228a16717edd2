package agentcmd

import (
	"context"
	"fmt"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/phases"
)

// How a started agent is supervised, apart from starting it and reading
// its result (driver.go): its output streamed and parsed, and the
// timeout, ctx, an output flood or a parser's stop enforced by terminating
// its process group in stages, until it is reaped and its pipes are closed.

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
