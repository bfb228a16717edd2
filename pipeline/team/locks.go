package team

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman/internal/proc"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// clearReapedLocks removes the git lock files an orphaned agent, killed by
// the lease reaper in a story's worktree, may have left in the middle of a
// git command (index.lock, HEAD.lock and its branch's ref lock): its whole
// process group is gone, so nobody holds them, and the next agent's `git
// commit` would fail on them ("Another git process seems to be running").
func clearReapedLocks(log *slog.Logger, r agentcmd.Reaped) {
	clearWorktreeLocks(log, r.Lease.Workspace)
}

// clearWorktreeLocks removes the git lock files of a story worktree whose
// git was cut off: index.lock, HEAD.lock and its branch's ref lock.
func clearWorktreeLocks(log *slog.Logger, workspace string) {
	gitdir, common, ok := worktreeGitDirs(workspace)
	if !ok {
		return
	}
	locks := []string{filepath.Join(gitdir, "index.lock"), filepath.Join(gitdir, "HEAD.lock")}
	if head, err := os.ReadFile(filepath.Join(gitdir, "HEAD")); err == nil {
		if ref, found := strings.CutPrefix(strings.TrimSpace(string(head)), "ref: "); found && filepath.IsLocal(ref) {
			locks = append(locks, filepath.Join(common, filepath.FromSlash(ref)+".lock"))
		}
	}
	for _, l := range locks {
		if err := os.Remove(l); err == nil {
			log.Info("team: removed a git lock left by a killed agent", "lock", l, "workspace", workspace)
		} else if !errors.Is(err, os.ErrNotExist) {
			log.Warn("team: removing a git lock left by a killed agent", "lock", l, "err", err)
		}
	}
}

// worktreeGitDirs finds a linked worktree's own git directory and the
// repository's common one from its .git file ("gitdir: ..."), without
// running git.
func worktreeGitDirs(workspace string) (gitdir, common string, ok bool) {
	data, err := os.ReadFile(filepath.Join(workspace, ".git"))
	if err != nil {
		return "", "", false // not a linked worktree (or no .git file)
	}
	dir, found := strings.CutPrefix(strings.TrimSpace(string(data)), "gitdir: ")
	if !found {
		return "", "", false
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(workspace, dir)
	}
	common = filepath.Join(dir, "..", "..") // <common>/worktrees/<name>
	if c, err := os.ReadFile(filepath.Join(dir, "commondir")); err == nil {
		cd := strings.TrimSpace(string(c))
		if !filepath.IsAbs(cd) {
			cd = filepath.Join(dir, cd)
		}
		common = cd
	}
	return filepath.Clean(dir), filepath.Clean(common), true
}

// reapStale lets each of the team's agent drivers deal with the leases a
// host that died left (agentcmd.Driver.ReapStale): the git locks of an
// agent cut off with its host are cleared before any stage, a merge
// included, finds them, also in a worktree where no agent runs again.
func (t *Team) reapStale(ctx context.Context) {
	seen := map[*agentcmd.Driver]bool{}
	agents := []phases.AgentDriver{t.cfg.Reviewer}
	for _, st := range t.cfg.Stages {
		agents = append(agents, st.Agent)
	}
	for _, a := range agents {
		d, ok := a.(*agentcmd.Driver)
		if !ok || seen[d] {
			continue
		}
		seen[d] = true
		if err := d.ReapStale(ctx); err != nil {
			t.log.Warn("team: reaping what a dead host's agents left", "err", err)
		}
	}
	t.clearAbandonedLocks()
}

// clearAbandonedLocks clears the git locks of every story worktree no
// process works in, as a Run starts: a git cut off with its host (an
// agent's, which dies with its sandbox, even one started before its lease
// was written) leaves its lock behind, and nothing of this Run runs yet.
// A worktree some process has for its working directory (an agent a dead
// host left, a person's shell) is left to the lease reaper and the merge's
// own checks.
func (t *Team) clearAbandonedLocks() {
	if t.mgr == nil {
		return
	}
	entries, err := os.ReadDir(t.mgr.Root())
	if err != nil {
		return
	}
	busy := busyDirs()
	for _, e := range entries {
		dir := filepath.Join(t.mgr.Root(), e.Name())
		if !e.IsDir() || busy(dir) {
			continue
		}
		clearWorktreeLocks(t.log, dir)
	}
}

// busyDirs reports whether a live process works in a directory or below
// it (its working directory, read from /proc).
func busyDirs() func(dir string) bool {
	var cwds []string
	pids, err := proc.PIDs()
	if err != nil {
		return func(string) bool { return true } // no /proc: assume busy
	}
	for _, pid := range pids {
		if cwd, err := proc.Cwd(pid); err == nil {
			cwds = append(cwds, cwd)
		}
	}
	return func(dir string) bool {
		if real, err := filepath.EvalSymlinks(dir); err == nil {
			dir = real
		}
		for _, c := range cwds {
			if c == dir || strings.HasPrefix(c, dir+string(filepath.Separator)) {
				return true
			}
		}
		return false
	}
}
