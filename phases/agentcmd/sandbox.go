package agentcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// SandboxMode says whether the driver runs its agents in an OS sandbox.
type SandboxMode string

// Sandbox modes.
const (
	// SandboxAuto runs each agent in a bubblewrap sandbox where bwrap is
	// installed and can create namespaces, and unsandboxed elsewhere
	// (Driver.Containment says why). It is the default.
	SandboxAuto SandboxMode = "auto"
	// SandboxOff runs agents unsandboxed.
	SandboxOff SandboxMode = "off"
	// SandboxRequired runs each agent in the sandbox, and fails Execute
	// with an error matching ErrNoSandbox where it is not available.
	SandboxRequired SandboxMode = "required"
)

// SandboxEnv is the environment variable read for Sandbox.Mode when the
// Config leaves it empty: "off", "auto" or "required", so that a person
// can turn the sandbox off (or insist on it) for a host that does not
// expose the setting.
const SandboxEnv = "FOREMAN_SANDBOX"

// ErrNoSandbox means SandboxRequired was asked for where the sandbox is not
// available (bwrap missing, or unable to create namespaces).
var ErrNoSandbox = errors.New("agentcmd: no OS sandbox available")

// SandboxError means the sandbox could not be set up for an execution: a
// path to bind is missing, bwrap failed before the agent ran. No agent ran.
type SandboxError struct {
	// Stage is what failed ("prepare", "bwrap").
	Stage string
	// Detail is bwrap's own message or the failing step's error.
	Detail string
	Err    error
}

func (e *SandboxError) Error() string {
	msg := "agentcmd: sandbox " + e.Stage + " failed"
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	if e.Err != nil {
		msg += ": " + e.Err.Error()
	}
	return msg
}

func (e *SandboxError) Unwrap() error { return e.Err }

// Bind is a host path bound into the sandbox.
type Bind struct {
	// Source is the host path. Required.
	Source string
	// Target is where the agent sees it: "" means Source; a path starting
	// with "~/" is under the agent's home (the sandbox's HOME,
	// /run/agent/home).
	Target string
	// Writable lets the agent write it; default read-only.
	Writable bool
}

// Sandbox configures the OS sandbox each agent runs in (Linux: bubblewrap).
// The zero value is the default: on where bwrap works.
type Sandbox struct {
	// Mode says whether agents run sandboxed. Empty means the value of the
	// FOREMAN_SANDBOX environment variable when it names a mode, else
	// SandboxAuto.
	Mode SandboxMode
	// Bwrap is the bubblewrap program. Empty means "bwrap", found in PATH.
	Bwrap string
	// HomeDir is where agents' homes are made: one directory per
	// workspace (named after a hash of its path), kept across executions
	// so that a CLI finds its sessions and configuration again (Claude
	// Code's --resume reads ~/.claude). Empty means <LeaseDir>/homes when
	// Config.LeaseDir is set, else a fresh temporary directory per
	// execution, removed after it (a CLI then cannot resume a session).
	// Whichever it is, the agent sees its home at /run/agent/home (its
	// HOME): a path that names nothing of the host's.
	HomeDir string
	// Binds are further host paths the agent may read (or write): a
	// shared module cache, a CLI installed under the host's home, the
	// CLI's own login (Source "/home/me/.claude", Target "~/.claude",
	// Writable: hands the agent that login). A missing Source is an
	// error. Default none.
	Binds []Bind
	// Hide are further host directories the agent must not see (an empty
	// directory is mounted over each); the host's home ($HOME), /root,
	// /run and /tmp are always hidden (/tmp is the agent's own). With a
	// Config.LeaseDir, each of Hide, the host's home, the lease directory,
	// /run and /root is a decoy: an empty directory of the execution,
	// writable, whose entries the agent made are reported after it (a
	// phases.StreamSandbox note per directory written) and removed;
	// without one, an empty read-only directory. Default none.
	Hide []string
	// Mirror are directories of Hide whose decoy repeats the names of the
	// real directory's entries (at most 1,000), each an empty canary (a
	// file's an empty file, a directory's an empty directory), so that an
	// agent opening or writing one by its name is seen. The names show to
	// the agent: mirror only a directory whose names are no secret, and
	// none whose names an agent CLI looks for in a parent directory
	// (CLAUDE.md, AGENTS.md). pipeline/team mirrors its worktree root (the
	// other stories' worktrees, named by their story ids). Default none.
	Mirror []string
	// HideNames says what the notes about an agent's writes into a hidden
	// directory call it, by its path as in Hide ("main checkout" for the
	// repository's). Default: "directory" (the host's home: "host's
	// home"; the lease directory: "lease directory"); the note gives the
	// path too.
	HideNames map[string]string
	// UnshareNet gives the agent a network namespace of its own with only
	// a loopback interface: it reaches nothing outside, not even the
	// host's 127.0.0.1 (a team's MCP server, a local model API). Default
	// false: the agent shares the host's network.
	UnshareNet bool
	// ChecksOffline gives each gate check the driver contains (Contain) a
	// network namespace of its own with only a loopback interface, as
	// UnshareNet does for the agents (which imply it for the checks): a
	// test the agent wrote cannot send what it reads anywhere, and a
	// module a check needs must be in a cache it can read (a Bind, and
	// GOFLAGS=-mod=mod with GOPROXY=off or GOMODCACHE in the check's Env).
	// Default false: checks share the agents' network.
	ChecksOffline bool
}

// sandboxProbe remembers, per Driver (and the Drivers derived from it with
// the With methods), whether bwrap works here.
type sandboxProbe struct {
	once  sync.Once
	bwrap string // the program's path when it works
	why   string // why not, when it does not
}

// mode resolves the configured mode.
func (s Sandbox) mode() SandboxMode {
	if s.Mode != "" {
		return s.Mode
	}
	switch m := SandboxMode(strings.ToLower(strings.TrimSpace(os.Getenv(SandboxEnv)))); m {
	case SandboxOff, SandboxRequired, SandboxAuto:
		return m
	}
	return SandboxAuto
}

// probeTimeout bounds the probe's run of bwrap.
const probeTimeout = 10 * time.Second

// run probes once: bwrap found, and a trivial command runs in a sandbox
// made with the options every execution uses.
func (p *sandboxProbe) run(program string) {
	p.once.Do(func() {
		if program == "" {
			program = "bwrap"
		}
		path, err := exec.LookPath(program)
		if err != nil {
			p.why = fmt.Sprintf("%s not found (install bubblewrap): %v", program, err)
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
		defer cancel()
		args := append(baseBwrapArgs(false), "--tmpfs", "/tmp", "--", "true")
		cmd := exec.CommandContext(ctx, path, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin"}
		if err := cmd.Run(); err != nil {
			p.why = fmt.Sprintf("%s cannot create a sandbox here: %v", path, err)
			if msg := strings.TrimSpace(stderr.String()); msg != "" {
				p.why += ": " + msg
			}
			return
		}
		p.bwrap = path
	})
}

// baseBwrapArgs are the options of every sandbox: the host's file system
// read-only, fresh /dev and /proc, own pid, IPC and UTS namespaces, no
// capabilities, killed with its parent.
func baseBwrapArgs(unshareNet bool) []string {
	args := []string{
		"--ro-bind", "/", "/",
		"--dev", "/dev",
		"--proc", "/proc",
		"--unshare-pid", "--unshare-ipc", "--unshare-uts",
		"--die-with-parent",
		"--cap-drop", "ALL",
	}
	if unshareNet {
		args = append(args, "--unshare-net")
	}
	return args
}

// sandboxBwrap returns the bwrap program to run the agent with, or "" to
// run it unsandboxed; an error only in SandboxRequired mode.
func (d *Driver) sandboxBwrap() (string, error) {
	switch d.cfg.Sandbox.mode() {
	case SandboxOff:
		return "", nil
	case SandboxRequired:
		d.probe.run(d.cfg.Sandbox.Bwrap)
		if d.probe.bwrap == "" {
			return "", fmt.Errorf("%w: %s", ErrNoSandbox, d.probe.why)
		}
		return d.probe.bwrap, nil
	default:
		d.probe.run(d.cfg.Sandbox.Bwrap)
		return d.probe.bwrap, nil
	}
}

// Containment says how the driver's agents are contained: "bwrap" when
// each runs in a bubblewrap sandbox, else "none: " and why (turned off,
// bwrap missing, namespaces refused). The first call may run bwrap once to
// find out; the answer is kept.
func (d *Driver) Containment() string {
	mode := d.cfg.Sandbox.mode()
	switch mode {
	case SandboxOff:
		src := "Config.Sandbox.Mode"
		if d.cfg.Sandbox.Mode == "" {
			src = SandboxEnv
		}
		return "none: sandbox turned off (" + src + ")"
	case SandboxAuto, SandboxRequired:
	default:
		return fmt.Sprintf("none: unknown sandbox mode %q", mode)
	}
	d.probe.run(d.cfg.Sandbox.Bwrap)
	if d.probe.bwrap == "" {
		return "none: " + d.probe.why
	}
	return "bwrap"
}

// Sandboxed reports whether the driver's agents run in an OS sandbox (see
// Containment): a host may then turn the agent CLI's own permission
// prompts off (the driver sets IS_SANDBOX=1 for Claude Code).
func (d *Driver) Sandboxed() bool { return d.Containment() == "bwrap" }

// checkSandboxConfig reports a Sandbox the driver cannot use.
func (s Sandbox) check() error {
	switch s.mode() {
	case SandboxAuto, SandboxOff, SandboxRequired:
	default:
		return fmt.Errorf("agentcmd: unknown sandbox mode %q (want auto, off or required)", s.Mode)
	}
	for _, b := range s.Binds {
		if b.Source == "" {
			return errors.New("agentcmd: sandbox bind without a Source")
		}
	}
	return nil
}

// hostSecretFilePatterns are the system's own secret files: the password
// and group shadows (and their backups) and the SSH host keys.
var hostSecretFilePatterns = []string{"/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-",
	"/etc/security/opasswd", "/etc/ssh/ssh_host_*_key"}

// hostSecretDirs are the system's directories of private keys (TLS
// servers', Let's Encrypt's): empty in the sandbox where they exist.
var hostSecretDirs = []string{"/etc/ssl/private", "/etc/pki/tls/private", "/etc/letsencrypt"}

// existingSecretDirs are the directories of hostSecretDirs here (a
// directory bwrap mounts over must exist: the root is read-only).
func existingSecretDirs() []string {
	var dirs []string
	for _, d := range hostSecretDirs {
		if info, err := os.Lstat(d); err == nil && info.IsDir() {
			dirs = append(dirs, d)
		}
	}
	return dirs
}

// hostSecretFiles are the regular files of hostSecretFilePatterns here:
// the sandbox binds an empty file over each.
func hostSecretFiles() []string {
	var files []string
	for _, pattern := range hostSecretFilePatterns {
		matches, _ := filepath.Glob(pattern)
		for _, f := range matches {
			if info, err := os.Lstat(f); err == nil && info.Mode().IsRegular() {
				files = append(files, f)
			}
		}
	}
	return files
}
