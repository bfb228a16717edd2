package riverbench

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux this runs on).
const clockTick = 100

// procCPU is the user and system CPU time a process has used so far, from
// /proc/<pid>/stat; zero when it cannot be read (the process is gone).
func procCPU(pid int) time.Duration {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0
	}
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * time.Second / clockTick
}

// postgresCPU is the CPU time used so far by every process named postgres
// (the server and its backends; run as root or as the server's user so
// that /proc shows them). Backends that ended in between are not counted:
// the benchmarks keep their connections for the whole run.
func postgresCPU() time.Duration {
	ents, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		comm, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil || strings.TrimSpace(string(comm)) != "postgres" {
			continue
		}
		total += procCPU(pid)
	}
	return total
}

// selfCPU is this process's user and system CPU time so far.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// cpuMeter measures the CPU time of this process, of other processes named
// by pid, and of PostgreSQL over a run.
type cpuMeter struct {
	self, pg, others time.Duration
	pids             []int
}

func startCPU(pids []int) *cpuMeter {
	m := &cpuMeter{self: selfCPU(), pg: postgresCPU(), pids: pids}
	for _, p := range pids {
		m.others += procCPU(p)
	}
	return m
}

// stop returns the CPU time used since start: by this process and the
// other processes together, and by PostgreSQL.
func (m *cpuMeter) stop() (client, pg time.Duration) {
	client = selfCPU() - m.self
	for _, p := range m.pids {
		client += procCPU(p)
	}
	return client - m.others, postgresCPU() - m.pg
}
