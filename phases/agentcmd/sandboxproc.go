package agentcmd

import (
	"bytes"
	"context"
	"strings"
	"syscall"

	"github.com/agentforeman/foreman/internal/proc"
	"github.com/agentforeman/foreman/phases"
)

// sandbox prepares the sandbox of inv and rewrites inv to run in it.
func (d *Driver) sandbox(ctx context.Context, bwrap string, req phases.AgentRequest, inv *invocation, home string) (*sandboxRun, error) {
	program, err := resolveProgram(inv.argv[0], req.WorkspacePath)
	if err != nil {
		return nil, &StartError{Argv0: inv.argv[0], Dir: req.WorkspacePath, Err: err}
	}
	sb, err := d.prepareSandbox(ctx, bwrap, req, program, inv.env, home, inv.readOnly)
	if err != nil {
		return nil, err
	}
	inv.argv = sb.argv(append([]string{program}, inv.argv[1:]...), statusFD)
	if err := checkArgSize(inv.argv, inv.env); err != nil {
		sb.cleanup()
		return nil, err
	}
	return sb, nil
}

// signalGroup sends sig to the agent's process group.
func (p *process) signalGroup(sig syscall.Signal) {
	if p.sandboxed && sig != syscall.SIGKILL {
		// bwrap, the leader, dies of SIGTERM and takes the sandbox with it
		// at once (--die-with-parent): the agent's processes get the
		// signal, bwrap follows them out. One that starts meanwhile gets
		// the SIGKILL after the grace period.
		members, err := proc.GroupMembers(p.pgid, 0)
		if err == nil {
			for _, pid := range members {
				if pid != p.pgid {
					_ = syscall.Kill(pid, sig)
				}
			}
			return
		}
	}
	p.d.signalGroup(p.pgid, sig)
}

// sandboxSetupFailed reports whether bwrap failed before the agent ran: it
// exited 1 without the "exit-code" record it writes once the agent is
// done. It waits for bwrap's status at most KillGrace.
func (p *process) sandboxSetupFailed(cfg Config) bool {
	if p.status == nil {
		return false
	}
	var data []byte
	t := cfg.Clock.NewTimer(cfg.KillGrace)
	defer t.Stop()
	select {
	case data = <-p.status:
	case <-t.C():
		return false
	}
	if ps := p.cmd.ProcessState; ps == nil || ps.ExitCode() != 1 {
		return false
	}
	return !bytes.Contains(data, []byte(`"exit-code"`))
}

// bwrapMessage picks bwrap's own lines out of the agent's stderr.
func bwrapMessage(stderr string) string {
	var lines []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "bwrap: ") {
			lines = append(lines, l)
		}
	}
	if len(lines) == 0 {
		return "bwrap exited 1 before the agent ran"
	}
	return strings.Join(lines, "; ")
}

// groupRunning reports, once the agent's leader has exited, whether a
// process of its group still runs. In a sandbox the leader is bwrap, which
// exits only after the namespace's init has: the kernel then kills every
// process in the namespace (a child holding the agent's output too), and
// what is left of the group is dying. Its output's ends are on their way.
func (p *process) groupRunning() bool {
	if p.sandboxed {
		return false
	}
	return proc.GroupAlive(p.pgid)
}

// afterSandbox runs once the sandboxed agent is gone: it carries the
// agent's branch back, lists what it wrote into the decoys (removed later
// by sb.cleanup), and reports what it refused or repaired as
// phases.StreamSandbox events.
func (d *Driver) afterSandbox(ctx context.Context, sb *sandboxRun, workspace string, onEvent phases.StreamCallback) {
	acc := sb.watch.collect(sb.notAgents)
	sb.watch = nil
	var notes []string
	if sb.git != nil {
		// Even when ctx ended: the agent's commits are on its branch only
		// once carried back.
		notes = sb.git.carryBack(context.WithoutCancel(ctx), acc.place(shadowPlace))
	}
	notes = append(notes, sb.decoyNotes(acc)...)
	if acc != nil && acc.overflow {
		// No note of the agent's: the host's own reads of the hidden
		// places fill the same queue (without the open watch), and what
		// the agent left there is named all the same.
		d.cfg.Logger.Warn("sandboxed agent: the watch of its hidden places overflowed: what was made and removed again there may not be named",
			"workspace", workspace)
	}
	for _, note := range notes {
		d.cfg.Logger.Warn("sandboxed agent refused or repaired", "workspace", workspace, "note", note)
		if onEvent != nil {
			line := "agentcmd: sandbox: " + note
			onEvent(phases.StreamEvent{Time: d.cfg.Clock.Now(), Kind: phases.StreamSandbox, Line: line, Text: line})
		}
	}
}
