package agentcmd

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// mountKind is what a sandbox mount puts at its target.
type mountKind uint8

const (
	mountTmpfs mountKind = iota // an empty, private directory
	mountRO                     // the source, read-only
	mountROTry                  // the source, read-only, when it exists
	mountRW                     // the source, writable
)

type mount struct {
	kind     mountKind
	src, dst string
	// writable: a tmpfs the agent may write (its /tmp); other hidden
	// directories are empty and read-only.
	writable bool
}

// sandboxHome is where every sandboxed agent finds its home (its HOME),
// whatever the home's path on the host (under Sandbox.HomeDir, by default
// <LeaseDir>/homes: a path that would tell the agent where the team's
// state directory is). It is under /run, which the sandbox hides (a decoy
// with a LeaseDir, else an empty directory), so that bwrap can make the
// mount point (it cannot on the read-only root); not under /tmp, the
// agent's own, which Codex's own sandbox replaces for the commands it
// runs. The same path for every execution: a CLI finds its sessions again
// (Claude Code's --resume).
const sandboxHome = "/run/agent/home"

// sandboxRun is one execution's sandbox: bwrap's options, the agent's home
// (sandboxHome, as the agent sees it), and what the driver does once the
// agent is gone.
type sandboxRun struct {
	bwrap  string
	mounts []mount
	chdir  string
	net    bool
	home   string
	// newSession: the command gets a session of its own from bwrap (a
	// gate check's; the driver starts an agent's bwrap in one).
	newSession bool
	// git is the workspace's repository layout; nil when the workspace is
	// not in a git repository.
	git *gitLayout
	// cleanups run after the agent, last first.
	cleanups []func()
	// decoys are bound over the hidden directories (decoy.go), all in
	// decoyRoot; none without a LeaseDir.
	decoys    []decoy
	decoyRoot string
	// watch watches the decoys and the git directory's copy while the
	// agent runs (accesswatch.go); nil without inotify.
	watch *accessWatch
}

// cleanup removes what prepareSandbox made for the execution alone.
func (s *sandboxRun) cleanup() {
	s.watch.collect(s.notAgents) // ends the watch, if the agent never ran
	s.watch = nil
	for i := len(s.cleanups) - 1; i >= 0; i-- {
		s.cleanups[i]()
	}
}

// prepareSandbox lays out the sandbox of one execution in the workspace:
// the host read-only, the private and hidden directories, then what the
// agent reads and writes.
func (d *Driver) prepareSandbox(ctx context.Context, bwrap string, req phases.AgentRequest, program string, env []string, home string, readOnly []string) (*sandboxRun, error) {
	cfg := d.cfg.Sandbox
	ws, err := filepath.Abs(req.WorkspacePath)
	if err != nil {
		return nil, &SandboxError{Stage: "prepare", Err: err}
	}
	if real, err := filepath.EvalSymlinks(ws); err == nil {
		ws = real
	}
	s := &sandboxRun{bwrap: bwrap, chdir: ws, net: cfg.UnshareNet, home: sandboxHome}
	fail := func(err error) (*sandboxRun, error) {
		s.cleanup()
		var se *SandboxError
		if errors.As(err, &se) {
			return nil, err
		}
		return nil, &SandboxError{Stage: "prepare", Err: err}
	}

	// What the agent must not see: the host's home and secrets' usual
	// places, other agents' leases, the host's own choice.
	hidden := []string{"/tmp", "/run", "/root"}
	if h, err := os.UserHomeDir(); err == nil {
		hidden = append(hidden, h)
	}
	if d.cfg.LeaseDir != "" {
		hidden = append(hidden, d.cfg.LeaseDir)
	}
	hidden = append(hidden, cfg.Hide...)
	// Each but /tmp (the agent's own) gets a decoy where the driver has a
	// LeaseDir to keep them in: an empty directory of this execution,
	// writable, looked at after it.
	decoyed := map[string]bool{}
	for _, h := range hidden {
		if a, ok := cleanDir(h); ok && a != "/tmp" {
			decoyed[a] = true
		}
	}
	root, err := d.decoyRoot()
	if err != nil {
		return fail(fmt.Errorf("decoys: %w", err))
	}
	if root != "" {
		s.decoyRoot = root
		s.cleanups = append(s.cleanups, func() { removeDecoys(root) })
	}
	var hides []string
	for _, h := range hidden {
		a, ok := cleanDir(h)
		if !ok || slices.Contains(hides, a) {
			continue
		}
		hides = append(hides, a)
		if root != "" && decoyed[a] {
			src := filepath.Join(root, strconv.Itoa(len(s.decoys)))
			if err := os.Mkdir(src, 0o700); err != nil {
				return fail(fmt.Errorf("decoys: %w", err))
			}
			s.decoys = append(s.decoys, decoy{dir: a, name: d.hideName(a), src: src, mirror: d.mirrored(a), ancestor: within(ws, a)})
			s.mounts = append(s.mounts, mount{kind: mountRW, src: src, dst: a})
			continue
		}
		s.mounts = append(s.mounts, mount{kind: mountTmpfs, dst: a, writable: a == "/tmp"})
	}
	// The system's directories of private keys, which an agent run as
	// root could read (a trial's gate read a TLS key): empty.
	for _, dir := range existingSecretDirs() {
		s.mounts = append(s.mounts, mount{kind: mountTmpfs, dst: dir})
	}
	// The host's secret files outside the hidden directories, which an
	// agent run as root could read: empty in the sandbox.
	// (An empty file of the execution: a device bound there would not
	// open on the sandbox's nodev root.)
	if secrets := hostSecretFiles(); len(secrets) > 0 {
		empty, err := os.CreateTemp("", ownerPattern("foreman-sandbox-empty-"))
		if err != nil {
			return fail(err)
		}
		_ = empty.Close()
		s.cleanups = append(s.cleanups, func() { _ = os.Remove(empty.Name()) })
		for _, f := range secrets {
			s.mounts = append(s.mounts, mount{kind: mountRO, src: empty.Name(), dst: f})
		}
	}
	under := func(p string) bool {
		for _, h := range hides {
			if within(p, h) {
				return true
			}
		}
		return false
	}
	// DNS through systemd-resolved lives under /run.
	s.mounts = append(s.mounts, mount{kind: mountROTry, src: "/run/systemd/resolve", dst: "/run/systemd/resolve"})

	// The agent's program, and the PATH it finds others in, where hidden.
	for _, dir := range programDirs(program) {
		if under(dir) && !slices.Contains(hides, dir) {
			s.mounts = append(s.mounts, mount{kind: mountROTry, src: dir, dst: dir})
		}
	}
	for _, dir := range filepath.SplitList(lookupEnv(env, "PATH")) {
		if a, ok := cleanDir(dir); ok && under(a) && !slices.Contains(hides, a) {
			s.mounts = append(s.mounts, mount{kind: mountROTry, src: a, dst: a})
		}
	}

	// Its home (at sandboxHome, whatever its path on the host), and what
	// the driver wrote for it to read.
	s.mounts = append(s.mounts, mount{kind: mountRW, src: home, dst: sandboxHome})
	for _, p := range readOnly {
		s.mounts = append(s.mounts, mount{kind: mountRO, src: p, dst: p})
	}

	// The workspace, and what git needs to commit there.
	s.mounts = append(s.mounts, mount{kind: mountRW, src: ws, dst: ws})
	layout, err := discoverGit(ctx, ws)
	if err != nil {
		return fail(err)
	}
	if layout != nil {
		s.git = layout
		ms, cleanup, err := layout.mounts(ws)
		if cleanup != nil {
			s.cleanups = append(s.cleanups, cleanup)
		}
		if err != nil {
			return fail(err)
		}
		s.mounts = append(s.mounts, ms...)
	}

	// What the request and the host add.
	for _, w := range req.Writable {
		a, err := existingPath(w)
		if err != nil {
			return fail(fmt.Errorf("writable path: %w", err))
		}
		s.mounts = append(s.mounts, mount{kind: mountRW, src: a, dst: a})
	}
	for _, b := range cfg.Binds {
		src, err := existingPath(b.Source)
		if err != nil {
			return fail(fmt.Errorf("bind: %w", err))
		}
		dst := b.Target
		switch {
		case dst == "":
			dst = src
		case strings.HasPrefix(dst, "~/"):
			dst = filepath.Join(s.home, dst[2:])
		case !filepath.IsAbs(dst):
			return fail(fmt.Errorf("bind target %q: not absolute and not under ~/", dst))
		}
		k := mountRO
		if b.Writable {
			k = mountRW
		}
		s.mounts = append(s.mounts, mount{kind: k, src: src, dst: filepath.Clean(dst)})
	}
	s.markSkeleton()
	if err := s.startWatch(!d.noOpenWatch); err != nil {
		return fail(fmt.Errorf("decoys: %w", err))
	}
	return s, nil
}

// agentHome makes (or finds) the agent's home for workspace ws: under
// Sandbox.HomeDir (or LeaseDir/homes) one per workspace, kept; else a new
// temporary directory the caller removes.
func (d *Driver) agentHome(ws string) (string, error) {
	root := d.homeRoot()
	if root == "" {
		return os.MkdirTemp("", ownerPattern("foreman-agent-home-"))
	}
	key, _, err := leaseKey(ws)
	if err != nil {
		return "", err
	}
	root, err = filepath.Abs(root)
	if err != nil {
		return "", err
	}
	home := filepath.Join(root, key)
	if err := os.MkdirAll(home, 0o700); err != nil {
		return "", err
	}
	return home, nil
}

// argv is bwrap's command line for the agent's argv; statusFD < 0 asks
// for no status records.
func (s *sandboxRun) argv(agent []string, statusFD int) []string {
	args := []string{s.bwrap}
	args = append(args, baseBwrapArgs(s.net)...)
	ms := slices.Clone(s.mounts)
	// Parents before children: a mount hides what an earlier one put
	// below its target. For one target, hiding first, then read-only,
	// then writable: the last one wins.
	slices.SortStableFunc(ms, func(a, b mount) int {
		if da, db := depth(a.dst), depth(b.dst); da != db {
			return da - db
		}
		return int(a.kind) - int(b.kind)
	})
	bound := map[string]bool{}
	for _, m := range ms {
		if m.kind != mountTmpfs {
			bound[m.dst] = true
		}
	}
	var remount []string
	for _, m := range ms {
		switch m.kind {
		case mountTmpfs:
			args = append(args, "--tmpfs", m.dst)
			if !m.writable && !bound[m.dst] {
				remount = append(remount, m.dst)
			}
		case mountRO:
			args = append(args, "--ro-bind", m.src, m.dst)
		case mountROTry:
			// bwrap skips a source that is not there, but fails on one
			// the host may not look at (a non-root host's PATH holding
			// /root/go/bin): skipped here.
			if _, err := os.Stat(m.src); err != nil && !errors.Is(err, fs.ErrNotExist) {
				continue
			}
			args = append(args, "--ro-bind-try", m.src, m.dst)
		case mountRW:
			args = append(args, "--bind", m.src, m.dst)
		}
	}
	// Read-only once what is bound below them is in place (bwrap makes the
	// mount points in them).
	for _, dst := range remount {
		args = append(args, "--remount-ro", dst)
	}
	if s.newSession {
		// No controlling terminal to push input into (TIOCSTI).
		args = append(args, "--new-session")
	}
	args = append(args, "--chdir", s.chdir)
	if statusFD >= 0 {
		args = append(args, "--json-status-fd", fmt.Sprint(statusFD))
	}
	args = append(args, "--")
	return append(args, agent...)
}

// depth is the number of components of a clean absolute path.
func depth(p string) int {
	if p == "/" {
		return 0
	}
	return strings.Count(p, "/")
}

// within reports whether p is dir or below it.
func within(p, dir string) bool {
	return p == dir || strings.HasPrefix(p, strings.TrimSuffix(dir, "/")+"/")
}

// cleanDir makes dir absolute and clean; "/" and relative paths are
// refused.
func cleanDir(dir string) (string, bool) {
	if dir == "" || !filepath.IsAbs(dir) {
		return "", false
	}
	dir = filepath.Clean(dir)
	return dir, dir != "/"
}

// existingPath is p, absolute, with its symbolic links resolved; an error
// when it does not exist.
func existingPath(p string) (string, error) {
	a, err := filepath.Abs(p)
	if err != nil {
		return "", err
	}
	return filepath.EvalSymlinks(a)
}

// programDirs are the directories the agent's program needs to be
// visible: its own, its symbolic link's target's, and the outermost
// node_modules holding it (an npm-installed CLI loads its packages from
// there).
func programDirs(program string) []string {
	if !filepath.IsAbs(program) {
		return nil
	}
	dirs := []string{filepath.Dir(program)}
	real, err := filepath.EvalSymlinks(program)
	if err != nil {
		return dirs
	}
	dirs = append(dirs, filepath.Dir(real))
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		dirs = append(dirs, real[:i+len("/node_modules")])
	}
	return dirs
}

// lookupEnv is the value of key in env, the last one as exec takes it.
func lookupEnv(env []string, key string) string {
	v := ""
	for _, kv := range env {
		if k, val, ok := strings.Cut(kv, "="); ok && k == key {
			v = val
		}
	}
	return v
}

// resolveProgram finds argv0 as exec would (PATH of this process; a
// relative path with a slash from the workspace), so that the sandbox runs
// that file.
func resolveProgram(argv0, workspace string) (string, error) {
	if strings.ContainsRune(argv0, filepath.Separator) {
		if !filepath.IsAbs(argv0) {
			argv0 = filepath.Join(workspace, argv0)
		}
		if _, err := os.Stat(argv0); err != nil {
			return "", err
		}
		return argv0, nil
	}
	p, err := exec.LookPath(argv0)
	if err != nil {
		return "", err
	}
	return filepath.Abs(p)
}
