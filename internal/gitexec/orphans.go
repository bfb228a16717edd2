package gitexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/internal/clock"
	"github.com/agentforeman/foreman/internal/proc"
)

// OwnerEnv is set in the environment of every git a Runner starts, and so
// of everything that git starts: "<pid>.<start time>" of the process that
// ran it. git runs in a process group of its own (so that a cancelled
// command's children go with it), which also means it outlives a host that
// is SIGKILLed: an OrphanReaper finds such gits by this variable.
const OwnerEnv = "FOREMAN_GIT_OWNER"

// OwnerValue names this process for OwnerEnv, or for another variable an
// OrphanReaper reads (Var). Without /proc it is the pid alone.
func OwnerValue() string {
	pid := os.Getpid()
	if st, err := proc.ReadStat(pid); err == nil {
		return strconv.Itoa(pid) + "." + strconv.FormatUint(st.StartTime, 10)
	}
	return strconv.Itoa(pid)
}

// ownerAlive reports whether the process an OwnerEnv value names still
// runs. A value it cannot read counts as alive: what it cannot identify,
// it does not kill.
func ownerAlive(owner string) bool {
	pidText, startText, _ := strings.Cut(owner, ".")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 {
		return true
	}
	var start uint64
	if startText != "" {
		if start, err = strconv.ParseUint(startText, 10, 64); err != nil {
			return true
		}
	}
	return proc.Alive(pid, start)
}

// WithoutOwner returns env without OwnerEnv: for processes the library
// starts that are not git (agents, gates, checks), so that an OwnerEnv this
// process inherited does not make them look like a dead host's gits.
func WithoutOwner(env []string) []string {
	out := make([]string, 0, len(env))
	for _, kv := range env {
		if !strings.HasPrefix(kv, OwnerEnv+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// Orphan is a process group whose owner (the process that started its
// leader: a git, or an agent) is gone, found by an OrphanReaper.
type Orphan struct {
	// PGID is the group.
	PGID int
	// PIDs are the group's orphaned processes seen running, and Dir the
	// working directory of the first of them.
	PIDs []int
	Dir  string
	// Owner is the dead owner, as OwnerEnv gave it.
	Owner string
	// Signal is empty when the group ended on its own; else the last
	// signal it was sent: SIGTERM, on which git removes its lock files, or
	// SIGKILL, which may leave one behind.
	Signal string
	// Survivors are the processes still running after SIGKILL and a
	// further grace period (a process stuck in the kernel).
	Survivors []int
}

// orphanPoll is how often OrphanReaper looks whether the orphans are gone:
// it is not their parent, so it cannot wait for them.
const orphanPoll = 10 * time.Millisecond

// OrphanReaper waits for, and if need be ends, the gits that a process now
// gone started (as OwnerEnv tells): a host SIGKILLed in the middle of `git
// worktree add`, a commit or a merge leaves its git running, and the next
// host's repair of the same worktree, or an agent's commit there, would
// race with it.
//
// An orphan is let finish, for up to Patience: a git ended half way leaves
// its work half done (a checkout with half its files written), where one
// that finishes leaves what its host would have found had it died a moment
// later, which the host's repairs expect. (Its output went to pipes into
// the dead host: a git that writes after its host died gets SIGPIPE and
// ends there. Foreman's gits are quiet until their work is done.) An
// orphan still running then gets SIGTERM (git removes its lock files and
// exits) and, after Grace, SIGKILL.
//
// Only processes carrying OwnerEnv are waited for or signalled, each by
// its pid, never a whole group; not this process or its children, and not
// a process that detached itself into a session of its own (`git gc
// --auto` in the background). A process that inherited OwnerEnv from
// outside (a host started by a hook of a git that Foreman ran) counts as
// that git's: the library's agents, gates and checks do not inherit it
// (WithoutOwner).
type OrphanReaper struct {
	// Var is the variable that names a process's owner (in OwnerValue's
	// form): OwnerEnv by default. agentcmd marks its agents with one of
	// its own.
	Var string
	// Clock paces the waits. Orphans are other processes, which a fake
	// clock does not govern: hosts pass a real one.
	Clock clock.Clock
	// Patience is how long orphans may run on (none: they are signalled at
	// once); Grace how long they get to end after each signal.
	Patience, Grace time.Duration
	// OnFound, when set, hears of the orphans found before they are waited
	// for.
	OnFound func([]Orphan)

	looked func() // tests: called after each look while waiting
}

// Reap deals with the orphans working under one of roots and returns them
// as they ended. Without /proc it finds none.
func (r OrphanReaper) Reap(ctx context.Context, roots []string) ([]Orphan, error) {
	if r.Var == "" {
		r.Var = OwnerEnv
	}
	roots = resolveRoots(roots)
	found, err := findOrphans(r.Var, roots)
	if err != nil || len(found) == 0 {
		return nil, err
	}
	var rep orphanReport
	rep.add(found)
	if r.OnFound != nil {
		r.OnFound(rep.orphans())
	}
	clk := clock.OrReal(r.Clock)
	remaining := found
	if r.Patience > 0 {
		remaining, err = r.waitGone(ctx, clk, roots, &rep, r.Patience)
	}
	for _, step := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "SIGTERM"}, {syscall.SIGKILL, "SIGKILL"}} {
		if err != nil || len(remaining) == 0 {
			break
		}
		for _, p := range remaining {
			rep.signalled(p.pgid, step.name)
			// Checked again just before: a pid is reused only after its
			// process is gone, and then its start time differs.
			if !proc.Alive(p.pid, p.start) {
				continue
			}
			if kerr := syscall.Kill(p.pid, step.sig); kerr != nil && !errors.Is(kerr, syscall.ESRCH) && err == nil {
				err = fmt.Errorf("gitexec: signal orphaned git %d: %w", p.pid, kerr)
			}
		}
		var werr error
		remaining, werr = r.waitGone(ctx, clk, roots, &rep, r.Grace)
		if err == nil {
			err = werr
		}
		if step.sig == syscall.SIGKILL {
			rep.survivors(remaining)
		}
	}
	return rep.orphans(), err
}

// waitGone looks again every orphanPoll, until no orphan runs under roots
// (nil) or d passes (those still running). Each look can find new ones: a
// git starts children.
func (r OrphanReaper) waitGone(ctx context.Context, clk clock.Clock, roots []string, rep *orphanReport, d time.Duration) ([]orphanProc, error) {
	deadline := clk.NewTimer(d)
	defer deadline.Stop()
	tick := clk.NewTicker(orphanPoll)
	defer tick.Stop()
	for {
		running, err := findOrphans(r.Var, roots)
		if r.looked != nil {
			r.looked()
		}
		if err != nil || len(running) == 0 {
			return running, err
		}
		rep.add(running)
		select {
		case <-ctx.Done():
			return running, fmt.Errorf("gitexec: waiting for orphaned gits: %w", ctx.Err())
		case <-deadline.C():
			return running, nil
		case <-tick.C():
		}
	}
}

// orphanProc is one orphaned process: (pid, start) names it for good.
type orphanProc struct {
	pid, pgid  int
	start      uint64
	dir, owner string
}

// findOrphans lists the running processes whose variable key names a
// process that is gone and whose working directory is under a root, leaving out
// this process, its children and detached sessions. Without /proc it
// finds none.
func findOrphans(key string, roots []string) ([]orphanProc, error) {
	pids, err := proc.PIDs()
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var found []orphanProc
	for _, pid := range pids {
		if pid == self {
			continue
		}
		owner, ok := proc.Getenv(pid, key)
		if !ok || ownerAlive(owner) {
			continue
		}
		cwd, err := proc.Cwd(pid)
		if err != nil || !under(cwd, roots) {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || !st.Running() || st.PPID == self || st.Session == st.PGrp {
			continue
		}
		found = append(found, orphanProc{pid: pid, pgid: st.PGrp, start: st.StartTime, dir: cwd, owner: owner})
	}
	return found, nil
}

// orphanReport gathers what was seen of each orphaned group, in the order
// the groups were first seen.
type orphanReport struct {
	groups []*Orphan
}

func (r *orphanReport) group(pgid int) *Orphan {
	for _, g := range r.groups {
		if g.PGID == pgid {
			return g
		}
	}
	return nil
}

func (r *orphanReport) add(procs []orphanProc) {
	for _, p := range procs {
		g := r.group(p.pgid)
		if g == nil {
			g = &Orphan{PGID: p.pgid, Dir: p.dir, Owner: p.owner}
			r.groups = append(r.groups, g)
		}
		if !slices.Contains(g.PIDs, p.pid) {
			g.PIDs = append(g.PIDs, p.pid)
		}
	}
}

func (r *orphanReport) signalled(pgid int, signal string) {
	if g := r.group(pgid); g != nil {
		g.Signal = signal
	}
}

func (r *orphanReport) survivors(procs []orphanProc) {
	for _, p := range procs {
		if g := r.group(p.pgid); g != nil {
			g.Survivors = append(g.Survivors, p.pid)
		}
	}
}

func (r *orphanReport) orphans() []Orphan {
	out := make([]Orphan, len(r.groups))
	for i, g := range r.groups {
		out[i] = *g
		out[i].PIDs = slices.Clone(g.PIDs)
		out[i].Survivors = slices.Clone(g.Survivors)
	}
	return out
}

// resolveRoots makes roots absolute with their symbolic links resolved, as
// /proc shows working directories.
func resolveRoots(roots []string) []string {
	var out []string
	for _, r := range roots {
		if r == "" {
			continue
		}
		if abs, err := filepath.Abs(r); err == nil {
			r = abs
		}
		if real, err := filepath.EvalSymlinks(r); err == nil {
			r = real
		}
		out = append(out, filepath.Clean(r))
	}
	return out
}

func under(dir string, roots []string) bool {
	for _, r := range roots {
		if dir == r || strings.HasPrefix(dir, r+string(filepath.Separator)) {
			return true
		}
	}
	return false
}
