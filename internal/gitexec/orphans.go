package gitexec

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
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

// ownerValue names this process for OwnerEnv. Without /proc it is the pid
// alone.
func ownerValue() string {
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

// Orphan is a git process group whose owner (the process that started the
// git) is gone, found by an OrphanReaper.
type Orphan struct {
	// PGID is the group, led by the git a Runner started.
	PGID int
	// PIDs are the group's processes found running, and Dir the working
	// directory of the first of them.
	PIDs []int
	Dir  string
	// Owner is the dead owner, as OwnerEnv gave it.
	Owner string
	// Signal is empty when the group ended on its own; else the last
	// signal it needed: SIGTERM, on which git removes its lock files, or
	// SIGKILL, which may leave one behind.
	Signal string
	// Survivors are the processes still running after SIGKILL and a
	// further grace period (a process stuck in the kernel).
	Survivors []int
}

// orphanPoll is how often OrphanReaper looks whether an orphan group is
// gone: it is not the orphans' parent, so it cannot wait for them.
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
// later, which the host's repairs expect. An orphan still running then gets
// SIGTERM (git removes its lock files and exits) and, after Grace, SIGKILL.
// Gits of living processes, this one included, are never touched.
type OrphanReaper struct {
	// Clock paces the waits. Orphans are other processes, which a fake
	// clock does not govern: hosts pass a real one.
	Clock clock.Clock
	// Patience is how long orphans may run on; Grace how long they get to
	// end after each signal.
	Patience, Grace time.Duration
	// OnFound, when set, hears of the orphans found before they are waited
	// for.
	OnFound func([]Orphan)
}

// Reap deals with the orphans working under one of roots and returns them
// as they ended.
func (r OrphanReaper) Reap(ctx context.Context, roots []string) ([]Orphan, error) {
	groups, err := findOrphans(resolveRoots(roots))
	if err != nil || len(groups) == 0 {
		return nil, err
	}
	if r.OnFound != nil {
		r.OnFound(orphansOf(groups))
	}
	clk := clock.OrReal(r.Clock)
	pending, err := waitGroupsGone(ctx, clk, groups, r.Patience)
	for _, step := range []struct {
		sig  syscall.Signal
		name string
	}{{syscall.SIGTERM, "SIGTERM"}, {syscall.SIGKILL, "SIGKILL"}} {
		if err != nil || len(pending) == 0 {
			break
		}
		for _, g := range pending {
			g.orphan.Signal = step.name
			if kerr := syscall.Kill(-g.orphan.PGID, step.sig); kerr != nil && !errors.Is(kerr, syscall.ESRCH) {
				return orphansOf(groups), fmt.Errorf("gitexec: signal orphaned git group %d: %w", g.orphan.PGID, kerr)
			}
		}
		pending, err = waitGroupsGone(ctx, clk, pending, r.Grace)
	}
	return orphansOf(groups), err
}

func orphansOf(groups []*orphanGroup) []Orphan {
	out := make([]Orphan, len(groups))
	for i, g := range groups {
		out[i] = g.orphan
	}
	return out
}

type orphanGroup struct {
	orphan    Orphan
	notBefore uint64 // the earliest start time among its members found
}

// findOrphans lists, by group, the running processes whose OwnerEnv names
// a process that is gone and whose working directory is under a root.
func findOrphans(roots []string) ([]*orphanGroup, error) {
	pids, err := proc.PIDs()
	if err != nil {
		return nil, err
	}
	self := os.Getpid()
	var groups []*orphanGroup
	byPGID := map[int]*orphanGroup{}
	for _, pid := range pids {
		if pid == self {
			continue
		}
		owner, ok := proc.Getenv(pid, OwnerEnv)
		if !ok || ownerAlive(owner) {
			continue
		}
		cwd, err := proc.Cwd(pid)
		if err != nil || !under(cwd, roots) {
			continue
		}
		st, err := proc.ReadStat(pid)
		if err != nil || !st.Running() {
			continue
		}
		g := byPGID[st.PGrp]
		if g == nil {
			g = &orphanGroup{orphan: Orphan{PGID: st.PGrp, Dir: cwd, Owner: owner}, notBefore: st.StartTime}
			byPGID[st.PGrp] = g
			groups = append(groups, g)
		}
		g.orphan.PIDs = append(g.orphan.PIDs, pid)
		g.notBefore = min(g.notBefore, st.StartTime)
	}
	return groups, nil
}

// waitGroupsGone polls until no member of the groups runs or d passes, and
// returns the groups with members still running; after d it records them
// as each group's Survivors.
func waitGroupsGone(ctx context.Context, clk clock.Clock, groups []*orphanGroup, d time.Duration) ([]*orphanGroup, error) {
	deadline := clk.NewTimer(d)
	defer deadline.Stop()
	tick := clk.NewTicker(orphanPoll)
	defer tick.Stop()
	for {
		var pending []*orphanGroup
		for _, g := range groups {
			running, err := proc.GroupMembers(g.orphan.PGID, g.notBefore)
			if err != nil {
				return groups, err
			}
			if g.orphan.Survivors = running; len(running) > 0 {
				pending = append(pending, g)
			}
		}
		if len(pending) == 0 {
			return nil, nil
		}
		groups = pending
		select {
		case <-ctx.Done():
			return groups, fmt.Errorf("gitexec: waiting for orphaned gits: %w", ctx.Err())
		case <-deadline.C():
			return groups, nil
		case <-tick.C():
		}
	}
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
