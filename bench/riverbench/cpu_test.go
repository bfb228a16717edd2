package riverbench

import (
	"bufio"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// clockTick is USER_HZ, the unit of /proc/<pid>/stat's CPU times (100 on
// every Linux this runs on).
const clockTick = 100

// procStat is a process's parent and the user and system CPU time it has
// used so far, from /proc/<pid>/stat; ok is false when it cannot be read
// (the process is gone).
func procStat(pid int) (ppid int, cpu time.Duration, ok bool) {
	b, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return 0, 0, false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold spaces
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, 0, false
	}
	ppid, _ = strconv.Atoi(f[1])
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return ppid, time.Duration(ut+st) * time.Second / clockTick, true
}

// procCPU is the CPU time a process has used so far (zero when it is gone).
func procCPU(pid int) time.Duration {
	_, cpu, _ := procStat(pid)
	return cpu
}

// serverPID is the PostgreSQL server (postmaster) the pool reaches: the
// parent of its backends. Other servers on the machine (other sessions'
// tests) are not counted.
func serverPID(pool *pgxpool.Pool) int {
	var backend int
	if err := pool.QueryRow(context.Background(), `SELECT pg_backend_pid()`).Scan(&backend); err != nil {
		return 0
	}
	ppid, _, _ := procStat(backend)
	return ppid
}

// postgresCPU is the CPU time used so far by the server and its processes
// (backends, WAL writer, ...; run as root or as the server's user so that
// /proc shows them). Backends that ended in between are not counted: the
// benchmarks keep their connections for the whole run.
func postgresCPU(server int) time.Duration {
	ents, _ := os.ReadDir("/proc")
	var total time.Duration
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		ppid, cpu, ok := procStat(pid)
		if ok && (pid == server || ppid == server) {
			total += cpu
		}
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
// by pid, and of the PostgreSQL server the pool reaches over a run.
type cpuMeter struct {
	self, pg, others time.Duration
	pids             []int
	server           int
}

func startCPU(pool *pgxpool.Pool, pids []int) *cpuMeter {
	server := serverPID(pool)
	m := &cpuMeter{self: selfCPU(), pg: postgresCPU(server), pids: pids, server: server}
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
	return client - m.others, postgresCPU(m.server) - m.pg
}

// startChild runs this test binary again as a child process with env
// added (the child's TestMain reads it), stopped with SIGTERM when ctx
// ends, and waits for the "ready" line it prints once it is up; the rest
// of its standard output is lines. wg is done when it has exited.
func startChild(b *testing.B, ctx context.Context, wg *sync.WaitGroup, env ...string) (cmd *exec.Cmd, lines *bufio.Scanner) {
	b.Helper()
	cmd = exec.CommandContext(ctx, os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = time.Minute
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		b.Fatal(err)
	}
	lines = bufio.NewScanner(out)
	if !lines.Scan() || lines.Text() != "ready" { // the clock starts with every child up
		b.Fatalf("child process %v did not start", env)
	}
	wg.Add(1)
	go func() { defer wg.Done(); _ = cmd.Wait() }()
	return cmd, lines
}
