package proc

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// Stat is what Foreman needs of /proc/<pid>/stat.
type Stat struct {
	State byte
	PPID  int
	PGrp  int
	// Session is the process's session id: a process that detached
	// itself (setsid, as `git gc --auto` does) leads a session of its own.
	Session int
	// StartTime is field 22: when the process started, in clock ticks
	// since boot.
	StartTime uint64
}

// Running reports whether the process still runs: a zombie only waits to be
// reaped and can no longer touch anything.
func (s Stat) Running() bool { return s.State != 'Z' && s.State != 'X' }

// ReadStat reads /proc/<pid>/stat. A process that does not exist is an
// error matching os.ErrNotExist.
func ReadStat(pid int) (Stat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			err = os.ErrNotExist // the process went away while it was read
		}
		return Stat{}, err
	}
	return ParseStat(string(data))
}

// ParseStat parses "pid (comm) state ppid pgrp ...". comm may hold spaces
// and parentheses, so the fields are counted from the last ')'.
func ParseStat(s string) (Stat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return Stat{}, fmt.Errorf("proc: malformed stat %q", s)
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return Stat{}, fmt.Errorf("proc: malformed stat %q", s)
	}
	ppid, err := strconv.Atoi(fields[4-3])
	if err != nil {
		return Stat{}, fmt.Errorf("proc: stat ppid: %w", err)
	}
	pgrp, err := strconv.Atoi(fields[5-3])
	if err != nil {
		return Stat{}, fmt.Errorf("proc: stat pgrp: %w", err)
	}
	session, err := strconv.Atoi(fields[6-3])
	if err != nil {
		return Stat{}, fmt.Errorf("proc: stat session: %w", err)
	}
	start, err := strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		return Stat{}, fmt.Errorf("proc: stat starttime: %w", err)
	}
	return Stat{State: fields[0][0], PPID: ppid, PGrp: pgrp, Session: session, StartTime: start}, nil
}

// PIDs lists the processes that exist now.
func PIDs() ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("proc: list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// GroupMembers lists the running processes of process group pgid that
// started no earlier than notBefore (clock ticks since boot).
func GroupMembers(pgid int, notBefore uint64) ([]int, error) {
	all, err := PIDs()
	if err != nil {
		return nil, err
	}
	var pids []int
	for _, pid := range all {
		st, err := ReadStat(pid)
		if err != nil {
			continue // exited while we looked
		}
		if st.PGrp == pgid && st.Running() && st.StartTime >= notBefore {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// GroupAlive reports whether any process of the group pgid exists.
func GroupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// Alive reports whether the process pid runs and, when startTime is not
// zero, is the one that started then.
func Alive(pid int, startTime uint64) bool {
	st, err := ReadStat(pid)
	return err == nil && st.Running() && (startTime == 0 || st.StartTime == startTime)
}

// Getenv returns the value of key in the environment pid was started
// with, the last one where it is set twice, as exec does; ok is false
// when it is not set or the environment cannot be read (another user's
// process, or one that is gone).
func Getenv(pid int, key string) (value string, ok bool) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "environ"))
	if err != nil {
		return "", false
	}
	prefix := []byte(key + "=")
	for kv := range bytes.SplitSeq(data, []byte{0}) {
		if v, found := bytes.CutPrefix(kv, prefix); found {
			value, ok = string(v), true
		}
	}
	return value, ok
}

// Cwd returns the working directory of pid.
func Cwd(pid int) (string, error) {
	return os.Readlink(filepath.Join("/proc", strconv.Itoa(pid), "cwd"))
}
