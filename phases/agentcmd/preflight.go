package agentcmd

import (
	"errors"
	"fmt"
	"maps"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// ErrAgentNotFound is matched by the error Check returns when the agent's
// program cannot be found.
var ErrAgentNotFound = errors.New("agentcmd: agent program not found")

// Check reports whether the driver can start its agent: the format is
// known, there is a command, its Sandbox is valid and, in SandboxRequired
// mode, the sandbox is available (an error matching ErrNoSandbox, saying
// why as Containment does: bwrap not found, or unable to create a
// sandbox; finding out runs bwrap once, as Containment does, and the
// answer is kept), and its program is found (in PATH, or at its absolute
// path). A program named by a relative path with a slash is looked up in
// each workspace when it runs, so it is not checked here. A host calls
// Check before handing out work, so that a missing agent binary or
// sandbox is one clear error at once rather than a failed execution per
// assignment.
func (d *Driver) Check() error {
	ad, ok := adapterFor(d.cfg.Format)
	if !ok {
		return fmt.Errorf("%w: %q", ErrUnknownFormat, d.cfg.Format)
	}
	argv := d.cfg.Argv
	if len(argv) == 0 {
		argv = ad.defaultArgv
	}
	if len(argv) == 0 || argv[0] == "" {
		return ErrNoCommand
	}
	if err := d.cfg.Sandbox.check(); err != nil {
		return err
	}
	if d.cfg.Sandbox.mode() == SandboxRequired {
		if _, err := d.sandboxBwrap(); err != nil {
			return err
		}
	}
	prog := argv[0]
	if strings.Contains(prog, "{") || (!filepath.IsAbs(prog) && strings.ContainsRune(prog, filepath.Separator)) {
		return nil
	}
	if _, err := exec.LookPath(prog); err != nil {
		return fmt.Errorf("%w: %q: %v", ErrAgentNotFound, prog, err)
	}
	return nil
}

// WithLeaseDir returns a new Driver with d's configuration and
// Config.LeaseDir set to dir, so that a host (or a library that runs the
// driver for it, such as pipeline/team) can turn the orphan reaper on for
// a driver built elsewhere. The new Driver keeps its own session totals and
// workspace locks.
func (d *Driver) WithLeaseDir(dir string) *Driver {
	cfg := d.cfg
	cfg.LeaseDir = dir
	return d.derive(cfg)
}

// LeaseDir returns the driver's Config.LeaseDir ("" when the orphan reaper
// is off).
func (d *Driver) LeaseDir() string { return d.cfg.LeaseDir }

// WithOnReap returns a new Driver with d's configuration whose
// Config.OnReap calls d's own OnReap, if any, and then fn: a host adds
// what it must do after an orphaned agent was killed in a workspace (such
// as clearing the git lock files the killed group left there).
func (d *Driver) WithOnReap(fn func(Reaped)) *Driver {
	cfg := d.cfg
	prev := cfg.OnReap
	cfg.OnReap = func(r Reaped) {
		if prev != nil {
			prev(r)
		}
		fn(r)
	}
	return d.derive(cfg)
}

// WithHide returns a new Driver with d's configuration and dirs added to
// Config.Sandbox.Hide: a host (pipeline/team, for its state directory)
// hides what its agents must not see. The new Driver shares d's sandbox
// probe, and keeps its own session totals and workspace locks.
func (d *Driver) WithHide(dirs ...string) *Driver {
	cfg := d.cfg
	cfg.Sandbox.Hide = append(slices.Clip(cfg.Sandbox.Hide), dirs...)
	return d.derive(cfg)
}

// WithMirror is a copy of the driver whose sandbox hides dirs too and
// mirrors their entries' names in their decoys (Sandbox.Mirror), sharing
// what WithHide shares.
func (d *Driver) WithMirror(dirs ...string) *Driver {
	cfg := d.cfg
	cfg.Sandbox.Hide = append(slices.Clip(cfg.Sandbox.Hide), dirs...)
	cfg.Sandbox.Mirror = append(slices.Clip(cfg.Sandbox.Mirror), dirs...)
	return d.derive(cfg)
}

// WithHideNamed is WithHide for one directory, with the name the notes
// about an agent's writes there give it (Sandbox.HideNames): pipeline/team
// hides its "main checkout", "state directory" and "worktree root" so.
func (d *Driver) WithHideNamed(dir, name string) *Driver {
	cfg := d.cfg
	cfg.Sandbox.Hide = append(slices.Clip(cfg.Sandbox.Hide), dir)
	names := maps.Clone(cfg.Sandbox.HideNames)
	if names == nil {
		names = map[string]string{}
	}
	names[dir] = name
	cfg.Sandbox.HideNames = names
	return d.derive(cfg)
}
