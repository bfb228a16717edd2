package agentcmd

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/internal/atomicfile"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/internal/proc"
)

// Lease is what the driver records in Config.LeaseDir about the agent it
// runs in a workspace, so that a driver in a later process can find the
// agent's process group if this one dies without cleaning up.
type Lease struct {
	// PID is the agent's process id; PGID its process group (the same
	// number: the agent leads a group of its own).
	PID  int `json:"pid"`
	PGID int `json:"pgid"`
	// StartTime is the agent's start time, field 22 of /proc/<pid>/stat in
	// clock ticks since boot: a pid with another start time is another
	// process.
	StartTime uint64 `json:"start_time"`
	// Workspace is the absolute workspace path.
	Workspace string `json:"workspace"`
	// Env holds the FOREMAN_* entries of the agent's environment (session,
	// iteration, and the assignment when the host sets one), but none whose
	// name says it holds a secret (TOKEN, SECRET, PASSWORD, KEY).
	Env       map[string]string `json:"env,omitempty"`
	WrittenAt time.Time         `json:"written_at"`
}

// Reaped reports an orphaned agent process group that the driver killed
// before starting a new agent in the same workspace. Config.OnReap receives
// it.
type Reaped struct {
	// Lease is the orphan's lease, as its driver wrote it.
	Lease Lease
	// PIDs are the processes of the orphaned group found running; none
	// when the agent had already ended with its host (a sandboxed agent
	// dies with it) and only its lease was left.
	PIDs []int
	// Signal is the last signal the group needed: SIGTERM, or SIGKILL when
	// something outlived the grace period; "" when none was running.
	Signal string
}

// ErrLeaseHeld means another Driver, in this process or another, holds the
// lock of the workspace's lease: it has an agent running in the workspace,
// and this driver starts none beside it.
var ErrLeaseHeld = errors.New("agentcmd: workspace lease held by another driver")

// OrphanError means an orphaned agent process group found through its lease
// was still running after SIGTERM, the grace period, SIGKILL and another
// grace period. No agent was started; the lease is kept.
type OrphanError struct {
	Workspace string
	PGID      int
	// PIDs are the processes still running.
	PIDs []int
}

func (e *OrphanError) Error() string {
	return fmt.Sprintf("agentcmd: orphaned agent process group %d in %s survived SIGKILL: pids %v", e.PGID, e.Workspace, e.PIDs)
}

// orphanPollInterval is how often the driver looks whether a signalled
// orphan group is gone: it is not the orphans' parent, so it cannot wait.
const orphanPollInterval = 10 * time.Millisecond

// minKillWait is the least the driver waits for an orphaned group to go
// after SIGKILL, whatever KillGrace says.
const minKillWait = time.Second

// leaseLocks serializes the executions of one driver per lease key. Across
// processes, flock on the key's lock file does it.
type leaseLocks struct {
	mu    sync.Mutex
	slots map[string]*leaseSlot
}

type leaseSlot struct {
	held chan struct{} // one token: the holder sent it
	refs int
}

// workspaceLease is an execution's hold on the lease of its workspace.
type workspaceLease struct {
	d         *Driver
	workspace string // absolute
	path      string // the lease file
	lock      *os.File
	unlock    func()
}

// leaseKey names a workspace's files in the lease directory after a hash
// of its absolute path (symbolic links resolved, where they resolve), so
// one workspace reached by two paths has one lease.
func leaseKey(workspace string) (key, abs string, err error) {
	abs, err = filepath.Abs(workspace)
	if err != nil {
		return "", "", fmt.Errorf("agentcmd: lease: %w", err)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	sum := sha256.Sum256([]byte(abs))
	return hex.EncodeToString(sum[:16]), abs, nil
}

// acquireLease takes the lease of workspace: first this driver's lock for
// it, waiting for an execution of this driver in the same workspace to end,
// then the lock file's flock, which fails with ErrLeaseHeld while another
// process holds it. The lock file is never removed: removing a locked file
// would let two processes lock two files of the same name.
func (d *Driver) acquireLease(ctx context.Context, workspace string) (*workspaceLease, error) {
	key, abs, err := leaseKey(workspace)
	if err != nil {
		return nil, err
	}
	unlock, err := d.leaseLocks.lock(ctx, key)
	if err != nil {
		return nil, fmt.Errorf("agentcmd: lease: %w", err)
	}
	if err := os.MkdirAll(d.cfg.LeaseDir, 0o755); err != nil {
		unlock()
		return nil, fmt.Errorf("agentcmd: lease: %w", err)
	}
	f, err := os.OpenFile(filepath.Join(d.cfg.LeaseDir, key+".lock"), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		unlock()
		return nil, fmt.Errorf("agentcmd: lease: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		_ = f.Close()
		unlock()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLeaseHeld, abs)
		}
		return nil, fmt.Errorf("agentcmd: lease: lock: %w", err)
	}
	return &workspaceLease{
		d: d, workspace: abs, path: filepath.Join(d.cfg.LeaseDir, key+".lease"), lock: f, unlock: unlock,
	}, nil
}

// release gives the lease's locks back; the lease file is left as it is.
func (l *workspaceLease) release() {
	_ = syscall.Flock(int(l.lock.Fd()), syscall.LOCK_UN)
	_ = l.lock.Close()
	l.unlock()
}

// record writes the lease of the agent p, atomically.
func (l *workspaceLease) record(p *process, env []string) error {
	st, err := proc.ReadStat(p.pgid)
	if err != nil {
		return fmt.Errorf("agentcmd: lease: agent start time: %w", err)
	}
	lease := Lease{
		PID: p.pgid, PGID: p.pgid, StartTime: st.StartTime, Workspace: l.workspace,
		Env: foremanEnv(env), WrittenAt: l.d.cfg.Clock.Now(),
	}
	if err := atomicfile.WriteJSON(l.path, lease, 0o600); err != nil {
		return fmt.Errorf("agentcmd: lease: %w", err)
	}
	return nil
}

// remove deletes the lease file once its process group is gone.
func (l *workspaceLease) remove() {
	if err := os.Remove(l.path); err != nil && !errors.Is(err, os.ErrNotExist) {
		l.d.cfg.Logger.Warn("removing agent lease failed", "lease", l.path, "err", err)
	}
}

// reapOrphan deals with a lease left by a driver that did not clean up. An
// agent group it names that still runs is an orphan (this execution holds
// the flock, so the driver that ran it is gone) and is killed; a lease
// whose processes are gone, or whose pid now belongs to another process, is
// removed.
func (l *workspaceLease) reapOrphan(ctx context.Context) error {
	cfg := l.d.cfg
	data, err := os.ReadFile(l.path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("agentcmd: lease: %w", err)
	}
	var lease Lease
	if err := json.Unmarshal(data, &lease); err != nil || lease.PGID <= 0 {
		// Written atomically, so not a torn write: nothing to go by.
		cfg.Logger.Warn("removing unreadable agent lease", "lease", l.path, "err", err)
		l.remove()
		return nil
	}
	running, err := lease.running()
	if err != nil {
		return err
	}
	if len(running) == 0 {
		// Its host died before the agent's end was recorded, and the agent
		// is gone too (a sandboxed agent dies with its host): what it was
		// doing may have been cut off, its git lock files left behind.
		cfg.Logger.Info("removing the lease of an agent that ended with its host", "lease", l.path, "pid", lease.PID)
		l.remove()
		if cfg.OnReap != nil {
			cfg.OnReap(Reaped{Lease: lease})
		}
		return nil
	}
	cfg.Logger.Warn("reaping orphaned agent process group", "workspace", l.workspace, "pgid", lease.PGID,
		"pids", running, "lease_written_at", lease.WrittenAt, "env", lease.Env)
	ev := Reaped{Lease: lease, PIDs: running}
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGKILL} {
		ev.Signal = signalName(sig)
		l.d.signalGroup(lease.PGID, sig)
		wait := cfg.KillGrace
		if sig == syscall.SIGKILL {
			// SIGKILL cannot be ignored, but a loaded machine takes its
			// time to end a process (CI saw one outlive 50 ms).
			wait = max(wait, minKillWait)
		}
		if running, err = l.waitGone(ctx, lease, wait); err != nil || len(running) == 0 {
			break
		}
	}
	if err != nil {
		return err
	}
	if len(running) > 0 {
		return &OrphanError{Workspace: l.workspace, PGID: lease.PGID, PIDs: running}
	}
	cfg.Logger.Info("reaped orphaned agent process group", "workspace", l.workspace, "pgid", lease.PGID,
		"pids", ev.PIDs, "signal", ev.Signal)
	l.remove()
	if cfg.OnReap != nil {
		cfg.OnReap(ev)
	}
	return nil
}

// AgentOwnerEnv is set in every agent's environment, and so in everything
// the agent starts: "<pid>.<start time>" of the host process that started
// it. A host can die between starting an agent and writing its lease;
// this variable still tells its agent for an orphan.
const AgentOwnerEnv = "FOREMAN_AGENT_OWNER"

// reapUnleased kills the agent processes working in the workspace whose
// AgentOwnerEnv names a host that is gone (SIGTERM, KillGrace, SIGKILL),
// whatever the leases say, and reports each group to OnReap as if its
// lease had named it.
func (l *workspaceLease) reapUnleased(ctx context.Context) error {
	cfg := l.d.cfg
	reaper := gitexec.OrphanReaper{Var: AgentOwnerEnv, Clock: cfg.Clock, Grace: cfg.KillGrace}
	orphans, err := reaper.Reap(ctx, []string{l.workspace})
	if err != nil {
		return fmt.Errorf("agentcmd: reaping orphaned agent: %w", err)
	}
	for _, o := range orphans {
		if len(o.Survivors) > 0 {
			return &OrphanError{Workspace: l.workspace, PGID: o.PGID, PIDs: o.Survivors}
		}
		cfg.Logger.Warn("reaped an orphaned agent that had no lease", "workspace", l.workspace, "pgid", o.PGID,
			"pids", o.PIDs, "owner", o.Owner, "signal", o.Signal)
		if cfg.OnReap != nil {
			cfg.OnReap(Reaped{Lease: Lease{PID: o.PGID, PGID: o.PGID, Workspace: l.workspace}, PIDs: o.PIDs, Signal: o.Signal})
		}
	}
	return nil
}

// waitGone polls until none of the lease's processes runs or wait
// passes, and returns those still running.
func (l *workspaceLease) waitGone(ctx context.Context, lease Lease, wait time.Duration) ([]int, error) {
	cfg := l.d.cfg
	grace := cfg.Clock.NewTimer(wait)
	defer grace.Stop()
	tick := cfg.Clock.NewTicker(orphanPollInterval)
	defer tick.Stop()
	for {
		running, err := lease.running()
		if err != nil || len(running) == 0 {
			return running, err
		}
		select {
		case <-ctx.Done():
			return running, fmt.Errorf("agentcmd: reaping orphaned agent: %w", ctx.Err())
		case <-grace.C():
			return lease.running()
		case <-tick.C():
		}
	}
}

// running lists the processes of the lease's agent that still run: the
// leader, if its pid still has the recorded start time, and the members of
// its group. A leader pid running with another start time was reused,
// which the kernel does only once no process has the number as its pid or
// group: the agent's group is all gone, and that process is not touched.
func (lease Lease) running() ([]int, error) {
	var pids []int
	st, err := proc.ReadStat(lease.PID)
	switch {
	case err == nil && st.StartTime != lease.StartTime:
		return nil, nil // pid reused
	case err == nil && st.Running():
		pids = append(pids, lease.PID)
	}
	members, err := proc.GroupMembers(lease.PGID, lease.StartTime)
	if err != nil {
		return nil, err
	}
	for _, pid := range members {
		if pid != lease.PID { // the leader, when running, is in already
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// lock takes this driver's lock for key, or fails when ctx ends first.
func (ll *leaseLocks) lock(ctx context.Context, key string) (func(), error) {
	ll.mu.Lock()
	if ll.slots == nil {
		ll.slots = make(map[string]*leaseSlot)
	}
	s := ll.slots[key]
	if s == nil {
		s = &leaseSlot{held: make(chan struct{}, 1)}
		ll.slots[key] = s
	}
	s.refs++
	ll.mu.Unlock()
	drop := func() {
		ll.mu.Lock()
		if s.refs--; s.refs == 0 {
			delete(ll.slots, key)
		}
		ll.mu.Unlock()
	}
	select {
	case s.held <- struct{}{}:
		return func() { <-s.held; drop() }, nil
	case <-ctx.Done():
		drop()
		return nil, ctx.Err()
	}
}

// foremanEnv picks the FOREMAN_* entries of env that hold no secret (an
// MCP token), for the lease; a later entry wins, as it does for exec.
func foremanEnv(env []string) map[string]string {
	m := make(map[string]string)
	for _, kv := range env {
		if k, v, ok := strings.Cut(kv, "="); ok && strings.HasPrefix(k, "FOREMAN_") && !secretName(k) {
			m[k] = v
		}
	}
	return m
}

// secretName reports whether a variable's name says it holds a secret.
func secretName(k string) bool {
	for _, w := range []string{"TOKEN", "SECRET", "PASSWORD", "KEY"} {
		if strings.Contains(k, w) {
			return true
		}
	}
	return false
}

// ReapStale deals, before any agent starts, with the leases in LeaseDir
// that a host which died left behind: a lease whose agent still runs is
// reaped (its group stopped) and one whose agent ended with its host is
// removed, each reported to Config.OnReap, so that the host clears what
// the agent may have left half done in its workspace (git's lock files)
// even where no agent will run again. A workspace whose lease another
// holder has (ErrLeaseHeld) is left alone. Nothing to do without LeaseDir.
func (d *Driver) ReapStale(ctx context.Context) error {
	if d.cfg.LeaseDir == "" {
		return nil
	}
	names, err := filepath.Glob(filepath.Join(d.cfg.LeaseDir, "*.lease"))
	if err != nil {
		return fmt.Errorf("agentcmd: lease: %w", err)
	}
	for _, name := range names {
		data, err := os.ReadFile(name)
		if err != nil {
			continue // removed meanwhile
		}
		var lease Lease
		if json.Unmarshal(data, &lease) != nil || lease.Workspace == "" {
			continue // Execute's reaper removes it when the workspace is used
		}
		l, err := d.acquireLease(ctx, lease.Workspace)
		if errors.Is(err, ErrLeaseHeld) {
			continue
		}
		if err != nil {
			return err
		}
		err = l.reapOrphan(ctx)
		l.release()
		if err != nil {
			return err
		}
	}
	return nil
}
