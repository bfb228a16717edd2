package agentcmd

import (
	"context"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
)

// A gate check runs the code under verification: a test the agent wrote,
// a build script it changed. Run on the host, it has the host's rights and
// environment, which the agent itself does not; so the driver contains a
// check as it contains its agent (Contain, a gates.Sandbox).

var _ gates.Sandbox = (*Driver)(nil)

// gateHomeSuffix names a workspace's gate home beside its agents' home.
const gateHomeSuffix = ".gates"

// DefaultCheckPassEnv returns the names of the host's environment variables
// a gate check gets from Contain (a name ending in "*" is a prefix):
// DefaultPassEnv's basics, proxies, certificates, git identity and Go
// module settings, without any agent CLI's API variables. The slice is
// new on every call.
func DefaultCheckPassEnv() []string { return basePassEnv() }

// Contain implements gates.Sandbox: a gate check runs in the sandbox the
// driver's agents run in (Config.Sandbox: the same mode, hidden and
// mirrored directories with their decoys, binds, network), with the same
// rights an agent of the workspace has and no more: the workspace
// writable, git's directory a private copy (a commit or a branch moved is
// refused and reported, never carried back), the host's home, secrets and
// the team's state out of sight. Its home is its own, one per workspace
// beside the agents' (kept with Config.LeaseDir or Sandbox.HomeDir, so that
// a Go build cache or a node cache survives from one check to the next;
// RemoveHome removes it with theirs), not the agents': an agent cannot
// leave configuration there that a check would obey. Its environment is
// built: DefaultCheckPassEnv and Config.PassEnv of the host's variables
// (never DefaultSecretEnv's or Config.SecretEnv's), HOME, TMPDIR=/tmp, then
// cmd.Env; not Config.Env, which is the agent's. A proxy variable with
// credentials names a local proxy that adds them, served until Done (or
// the end of ctx), as for an agent (see the package doc); one the driver
// cannot read fails Contain with a *ProxyURLError.
//
// Where the driver runs agents unsandboxed (SandboxOff, or SandboxAuto
// without bubblewrap) the check runs on the host as before, but in the
// environment built the same way with the host's HOME. With
// SandboxRequired and no sandbox it fails with ErrNoSandbox. Done reports
// what the sandbox refused of the check's: a write into a hidden place's
// decoy, a ref moved in its copy, what it read of the mirrored canaries
// (as root), one line each.
func (d *Driver) Contain(ctx context.Context, cmd gates.CheckCommand) (gates.Contained, error) {
	if err := d.cfg.Sandbox.check(); err != nil {
		return gates.Contained{}, err
	}
	d.sweepLeftovers()
	bwrap, err := d.sandboxBwrap()
	if err != nil {
		return gates.Contained{}, err
	}
	if bwrap == "" {
		env, stopProxies, err := d.proxyEnv(ctx, d.checkEnviron(cmd.Env, ""), false)
		if err != nil {
			return gates.Contained{}, err
		}
		cmd.Env = env
		return gates.Contained{CheckCommand: cmd, Done: func(context.Context) []string { stopProxies(); return nil }}, nil
	}
	home, removeHome, err := d.gateHome(cmd.Dir)
	if err != nil {
		return gates.Contained{}, &SandboxError{Stage: "prepare", Err: err}
	}
	// No proxy's credentials reach the check: a local proxy adds them
	// (proxycreds.go) until Done, or the end of ctx; offline, there is
	// nothing to reach and none starts.
	env, stopProxies, err := d.proxyEnv(ctx, d.checkEnviron(cmd.Env, agentHOME(home)), // (bound at sandboxHome)
		d.cfg.Sandbox.UnshareNet || d.cfg.Sandbox.ChecksOffline)
	if err != nil {
		removeHome()
		return gates.Contained{}, err
	}
	// The program as the host would find it, so that its directory is
	// bound where hidden; one the host cannot find is left to the
	// sandbox's own lookup, which fails with bwrap's message.
	argv := cmd.Argv
	program := argv[0]
	if p, err := resolveProgram(argv[0], cmd.Dir); err == nil {
		program = p
		argv = append([]string{p}, argv[1:]...)
	}
	// git works as for an agent: a go generate or a test that commits in
	// its copy needs an identity (nothing it commits is carried back).
	env = d.withGitIdentity(ctx, cmd.Dir, env)
	sb, err := d.prepareSandbox(ctx, bwrap, phases.AgentRequest{WorkspacePath: cmd.Dir}, program, env, home, nil)
	if err != nil {
		stopProxies()
		removeHome()
		return gates.Contained{}, err
	}
	sb.newSession = true
	sb.net = sb.net || d.cfg.Sandbox.ChecksOffline
	out := gates.Contained{CheckCommand: gates.CheckCommand{Dir: cmd.Dir, Argv: sb.argv(argv, -1), Env: env}}
	out.Done = func(ctx context.Context) []string {
		defer removeHome()
		defer sb.cleanup()
		defer stopProxies()
		acc := sb.watch.collect(sb.notAgents)
		sb.watch = nil
		var notes []string
		if sb.git != nil {
			notes = sb.git.checkBack(ctx)
		}
		notes = append(notes, sb.decoyNotes(acc)...)
		for _, note := range notes {
			d.cfg.Logger.Warn("sandboxed gate check refused or repaired", "workspace", cmd.Dir, "argv0", cmd.Argv[0], "note", note)
		}
		return notes
	}
	return out, nil
}

// gateHome makes (or finds) the home of workspace ws's gate checks: beside
// its agents' home, kept; else a temporary directory that remove removes.
func (d *Driver) gateHome(ws string) (home string, remove func(), err error) {
	root := d.homeRoot()
	if root == "" {
		home, err = os.MkdirTemp("", ownerPattern("foreman-agent-home-"))
		return home, func() { _ = removeHomeDir(home) }, err
	}
	key, _, err := leaseKey(ws)
	if err != nil {
		return "", nil, err
	}
	if root, err = filepath.Abs(root); err != nil {
		return "", nil, err
	}
	home = filepath.Join(root, key+gateHomeSuffix)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", nil, err
	}
	return home, func() {}, nil
}

// checkEnviron is a gate check's environment: the host's variables that
// DefaultCheckPassEnv and Config.PassEnv name and no secret list does, the
// sandbox's HOME and TMPDIR (home "" unsandboxed: the host's stay), then
// extra (the Verifier's and the check's own).
func (d *Driver) checkEnviron(extra []string, home string) []string {
	pass := append(DefaultCheckPassEnv(), d.cfg.PassEnv...)
	secret := append(DefaultSecretEnv(), d.cfg.SecretEnv...)
	var env []string
	for _, kv := range gitexec.WithoutOwner(os.Environ()) {
		k, _, ok := strings.Cut(kv, "=")
		if !ok || !envMatch(k, pass) || envMatch(k, secret) {
			continue
		}
		if home != "" && (k == "HOME" || k == "TMPDIR") {
			continue
		}
		env = append(env, kv)
	}
	if home != "" {
		env = append(env, "HOME="+home, "TMPDIR=/tmp")
	}
	return append(env, extra...)
}
