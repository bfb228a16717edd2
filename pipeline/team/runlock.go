package team

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/internal/clock"
)

// ErrBusy is matched by Run when another process (or another Team value)
// is running the team on the same state: two coordinators of one plan
// would hand out the same stories.
var ErrBusy = errors.New("team: another process is running this team")

// runInfo is what the running host writes into its run lock, for status
// readers in other processes.
type runInfo struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host,omitempty"`
	Workers int       `json:"workers"`
	Started time.Time `json:"started"`
	// Since is the holder process's start in clock ticks since boot
	// (/proc/<pid>/stat): a process with its pid and another start is
	// not the holder (the pid was reused). 0 where not known.
	Since int64 `json:"since,omitempty"`
}

// runLock is an exclusive flock on StateDir/run.lock, held while Run runs.
// The kernel drops it when its holder dies, however it dies, so a crashed
// host never leaves the team locked.
type runLock struct{ f *os.File }

func runLockPath(stateDir string) string { return filepath.Join(stateDir, "run.lock") }

// deadHolderWait bounds how long acquireRunLock waits for the lock of a
// holder that is dead: the kernel frees it once the last copy of its
// descriptor closes, and a child the holder forked keeps one until it
// execs. A holder killed while starting git or an agent leaves such a
// child for a moment (seen in CI: a run started right after a SIGKILL
// found the dead host's lock still held, 1 run in 50).
const deadHolderWait = 5 * time.Second

// changingHands bounds how long acquireRunLock looks again at a lock held
// with no holder written in it (released or taken that moment).
const changingHands = 200 * time.Millisecond

func acquireRunLock(ctx context.Context, stateDir string, info runInfo) (*runLock, error) {
	return acquireRunLockWaiting(ctx, stateDir, info, deadHolderWait)
}

func acquireRunLockWaiting(ctx context.Context, stateDir string, info runInfo, wait time.Duration) (*runLock, error) {
	path := runLockPath(stateDir)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	// Real time, not the team's clock: what is waited for is the kernel
	// closing a dead process's descriptors.
	deadline := time.Now().Add(wait)
	// A holder empties the file just before it unlocks, and a new holder
	// just after it locks: a lock held with nothing readable in it is one
	// changing hands, looked at again for a moment before it counts as busy.
	unreadable := time.Now().Add(min(wait, changingHands))
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			f.Close()
			return nil, fmt.Errorf("team: locking %s: %w", path, err)
		}
		held, ok := readRunInfo(path)
		if (ok && heldByTheDead(held, info) && time.Now().Before(deadline)) || (!ok && time.Now().Before(unreadable)) {
			if err := clock.Sleep(ctx, clock.Real(), 10*time.Millisecond); err != nil {
				f.Close()
				return nil, err
			}
			continue
		}
		f.Close()
		if ok {
			return nil, fmt.Errorf("%w (pid %d on %s, since %s)", ErrBusy, held.PID, held.Host, held.Started.Format(time.RFC3339))
		}
		return nil, ErrBusy
	}
	if data, err := json.Marshal(info); err == nil && f.Truncate(0) == nil {
		_, _ = f.WriteAt(append(data, '\n'), 0)
	}
	return &runLock{f: f}, nil
}

// heldByTheDead reports whether the lock's recorded holder is a process of
// this host that no longer exists: no process has its pid, or the one that
// has it started after the holder took the lock (the pid was reused: on a
// busy machine it may be within seconds).
func heldByTheDead(held, me runInfo) bool {
	if held.PID <= 0 || held.PID == me.PID || held.Host != me.Host {
		return false
	}
	err := syscall.Kill(held.PID, 0)
	if errors.Is(err, syscall.ESRCH) {
		return true
	}
	if err != nil {
		return false
	}
	if held.Since != 0 {
		ticks, ok := startTicks(held.PID)
		return ok && ticks != held.Since
	}
	return !held.Started.IsZero() && startedAfter(held.PID, held.Started.Add(time.Second))
}

// startTicks is process pid's start in clock ticks since boot (field 22
// of /proc/<pid>/stat).
func startTicks(pid int) (int64, bool) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name may hold spaces and parentheses: the fields are
	// counted from the last ')', whose next is field 3 (the state).
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, false
	}
	fields := strings.Fields(string(stat[i+1:]))
	if len(fields) < 20 {
		return 0, false
	}
	ticks, err := strconv.ParseInt(fields[19], 10, 64)
	return ticks, err == nil
}

// startedAfter reports whether process pid started after t, by its start
// in /proc (clock ticks since boot, 100 a second, and the boot time in
// whole seconds: t carries a second's slack); false when it cannot tell.
func startedAfter(pid int, t time.Time) bool {
	ticks, ok := startTicks(pid)
	if !ok {
		return false
	}
	boot, ok := bootTime()
	if !ok {
		return false
	}
	return boot.Add(time.Duration(ticks) * (time.Second / 100)).After(t)
}

// bootTime is the host's boot time from /proc/stat (btime).
func bootTime() (time.Time, bool) {
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		return time.Time{}, false
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "btime "); ok {
			secs, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			return time.Unix(secs, 0), err == nil
		}
	}
	return time.Time{}, false
}

// release unlocks before it closes. Closing alone drops the flock only when
// no other descriptor shares the open file: a process this one forks (a git
// command, an agent, from any goroutine) holds a copy until it execs, and a
// Run right after this one would find the lock still held (ErrBusy, seen in
// pipeline/team's parallel tests). LOCK_UN releases it for every copy.
func (l *runLock) release() {
	_ = l.f.Truncate(0)
	_ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN)
	_ = l.f.Close()
}

// runningElsewhere reports whether a host holds the run lock, and what it
// wrote there. It tries the lock shared, so that status readers do not see
// each other.
func runningElsewhere(stateDir string) (runInfo, bool) {
	path := runLockPath(stateDir)
	f, err := os.Open(path)
	if err != nil {
		return runInfo{}, false
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err == nil {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		return runInfo{}, false
	}
	info, _ := readRunInfo(path)
	// A holder that is dead on this host (its lock a moment from freed:
	// a child it forked has not exec'd yet) runs nothing: a Run started
	// now waits for that lock (acquireRunLock), so it is not reported
	// running.
	host, _ := os.Hostname()
	if heldByTheDead(info, runInfo{PID: os.Getpid(), Host: host}) {
		return info, false
	}
	return info, true
}

func readRunInfo(path string) (runInfo, bool) {
	data, err := os.ReadFile(path)
	if err != nil {
		return runInfo{}, false
	}
	var info runInfo
	return info, json.Unmarshal(data, &info) == nil
}
