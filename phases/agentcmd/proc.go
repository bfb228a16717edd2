package agentcmd

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// procStat is what the driver needs of /proc/<pid>/stat.
type procStat struct {
	state byte
	pgrp  int
	// startTime is field 22: when the process started, in clock ticks
	// since boot. With the pid it identifies a process: a pid is reused,
	// a (pid, start time) pair is not.
	startTime uint64
}

// running reports whether the process still runs: a zombie only waits to be
// reaped and can no longer touch anything.
func (s procStat) running() bool { return s.state != 'Z' && s.state != 'X' }

// readProcStat reads /proc/<pid>/stat. A process that does not exist is an
// error matching os.ErrNotExist.
func readProcStat(pid int) (procStat, error) {
	data, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		if errors.Is(err, syscall.ESRCH) {
			err = os.ErrNotExist // the process went away while it was read
		}
		return procStat{}, err
	}
	return parseProcStat(string(data))
}

// parseProcStat parses "pid (comm) state ppid pgrp ...". comm may hold
// spaces and parentheses, so the fields are counted from the last ')'.
func parseProcStat(s string) (procStat, error) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return procStat{}, fmt.Errorf("agentcmd: malformed /proc stat %q", s)
	}
	// fields[0] is field 3 (state), so field n is fields[n-3].
	fields := strings.Fields(s[i+1:])
	if len(fields) < 20 || len(fields[0]) != 1 {
		return procStat{}, fmt.Errorf("agentcmd: malformed /proc stat %q", s)
	}
	pgrp, err := strconv.Atoi(fields[5-3])
	if err != nil {
		return procStat{}, fmt.Errorf("agentcmd: /proc stat pgrp: %w", err)
	}
	start, err := strconv.ParseUint(fields[22-3], 10, 64)
	if err != nil {
		return procStat{}, fmt.Errorf("agentcmd: /proc stat starttime: %w", err)
	}
	return procStat{state: fields[0][0], pgrp: pgrp, startTime: start}, nil
}

// runningGroupMembers lists the running processes of process group pgid
// that started no earlier than notBefore (clock ticks since boot).
func runningGroupMembers(pgid int, notBefore uint64) ([]int, error) {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil, fmt.Errorf("agentcmd: list processes: %w", err)
	}
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue // exited while we looked
		}
		if st.pgrp == pgid && st.running() && st.startTime >= notBefore {
			pids = append(pids, pid)
		}
	}
	return pids, nil
}

// signalGroup sends sig to process group pgid; a group that is already gone
// is not an error.
// groupAlive reports whether any process of the group pgid exists.
func groupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (d *Driver) signalGroup(pgid int, sig syscall.Signal) {
	if err := syscall.Kill(-pgid, sig); err != nil && !errors.Is(err, syscall.ESRCH) {
		d.cfg.Logger.Warn("signalling agent process group failed", "pgid", pgid, "signal", signalName(sig), "err", err)
	}
}
