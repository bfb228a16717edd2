package worker

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
)

// Evidence is what a worker did since its last progress, gathered before a
// worker whose progress deadline passed is declared stuck: slow is not
// stuck.
type Evidence struct {
	// OutputLines the agent printed.
	OutputLines int64
	// Files: files in the worktree (.git excluded) appeared, went away, or
	// changed size or modification time.
	Files bool
	// CPU time used by the agent's processes (its process group, children
	// included).
	CPU time.Duration
}

// String says what the evidence shows, for events and escalations.
func (e Evidence) String() string {
	var parts []string
	if e.OutputLines > 0 {
		parts = append(parts, fmt.Sprintf("%d output lines", e.OutputLines))
	}
	if e.Files {
		parts = append(parts, "files changing in the worktree")
	}
	if e.CPU > 0 {
		parts = append(parts, fmt.Sprintf("%s of CPU time", e.CPU.Round(10*time.Millisecond)))
	}
	if len(parts) == 0 {
		return "no evidence of work"
	}
	return strings.Join(parts, ", ")
}

// WorkEvidence gathers evidence of an assignment's work since since (its
// last progress). The default Runtime implements it; a network transport
// may. It is called without the Dispatcher's lock, by the goroutine
// carrying out effects, so it should be quick.
type WorkEvidence interface {
	Evidence(ctx context.Context, w foreman.WorkerID, a foreman.AssignmentID, since time.Time) (Evidence, error)
}

// shows reports whether ev is evidence of work: any output, any file
// change, or at least SlowWorkerMinCPU of CPU time.
func (c *core) shows(ev Evidence) bool {
	return ev.OutputLines > 0 || ev.Files || (ev.CPU > 0 && ev.CPU >= c.cfg.slowMinCPU)
}

// ErrNoRun is returned by Runtime.Evidence for an assignment it does not
// run (finished, or never started).
var ErrNoRun = errors.New("worker: no running agent for the assignment")

// ErrNoEvidence is returned by Runtime.Evidence when RuntimeConfig.NoEvidence
// is set.
var ErrNoEvidence = errors.New("worker: the runtime keeps no evidence of work (RuntimeConfig.NoEvidence)")

// evidenceMark is what a run had done when it last made progress or was
// last asked for evidence.
type evidenceMark struct {
	lines int64
	cpu   time.Duration
	files uint64
}

// Evidence reports what the agent of assignment a did since the run's last
// mark: the start of the assignment, the last progress the Runtime itself
// saw (a new commit, a quality-gate result), or the previous call; then it
// sets the mark to now, so that each extension needs fresh evidence. since
// is not needed: the Runtime marks progress itself.
func (r *Runtime) Evidence(_ context.Context, w foreman.WorkerID, a foreman.AssignmentID, _ time.Time) (Evidence, error) {
	if r.cfg.NoEvidence {
		return Evidence{}, ErrNoEvidence
	}
	r.mu.Lock()
	rn := r.runs[w]
	r.mu.Unlock()
	if rn == nil || rn.a.ID != a {
		return Evidence{}, fmt.Errorf("%w: %s", ErrNoRun, a)
	}
	now := r.measure(rn)
	rn.markMu.Lock()
	prev := rn.mark
	rn.mark = now
	rn.markMu.Unlock()
	return Evidence{
		OutputLines: now.lines - prev.lines,
		Files:       now.files != prev.files,
		CPU:         max(0, now.cpu-prev.cpu),
	}, nil
}

// remark sets rn's mark to now: the Runtime saw progress.
func (r *Runtime) remark(rn *run) {
	if r.cfg.NoEvidence {
		return
	}
	m := r.measure(rn)
	rn.markMu.Lock()
	rn.mark = m
	rn.markMu.Unlock()
}

func (r *Runtime) measure(rn *run) evidenceMark {
	m := evidenceMark{lines: rn.outputLines.Load(), files: worktreeSignature(rn.a.Worktree)}
	if pid := rn.pid.Load(); pid > 0 {
		m.cpu = groupCPU(int(pid))
	}
	return m
}

// maxSignatureEntries bounds the worktree walk of one signature.
const maxSignatureEntries = 100_000

// worktreeSignature hashes the names, sizes and modification times of the
// files under dir (.git excluded), so that any change shows as a different
// value. Zero when dir is empty or unreadable.
func worktreeSignature(dir string) uint64 {
	if dir == "" {
		return 0
	}
	h := fnv.New64a()
	n := 0
	_ = filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // a file that went away while walking
		}
		if d.IsDir() && d.Name() == ".git" {
			return filepath.SkipDir
		}
		if n++; n > maxSignatureEntries {
			return filepath.SkipAll
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		fmt.Fprintf(h, "%s\x00%d\x00%d\n", path, info.Size(), info.ModTime().UnixNano())
		return nil
	})
	return h.Sum64()
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100 on
// every Linux ABI.
const clockTicks = 100

// groupCPU is the CPU time (user and system, with that of reaped
// children) of the processes in process group pgid, read from /proc. The
// agent runs in a group of its own (agentcmd), so this is the agent's
// process tree. Zero where /proc cannot be read.
func groupCPU(pgid int) time.Duration {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return 0
	}
	var ticks uint64
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		data, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		if g, t, ok := parseStatCPU(string(data)); ok && g == pgid {
			ticks += t
		}
	}
	return time.Duration(ticks) * time.Second / clockTicks
}

// parseStatCPU reads the process group (field 5) and utime, stime, cutime
// and cstime (fields 14-17) of a /proc/<pid>/stat line; comm (field 2) may
// hold spaces and parentheses, so fields are counted from the last ')'.
func parseStatCPU(s string) (pgrp int, ticks uint64, ok bool) {
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, 0, false
	}
	f := strings.Fields(s[i+1:]) // f[0] is field 3
	if len(f) < 15 {
		return 0, 0, false
	}
	pgrp, err := strconv.Atoi(f[5-3])
	if err != nil {
		return 0, 0, false
	}
	for _, k := range []int{14, 15, 16, 17} {
		v, err := strconv.ParseUint(f[k-3], 10, 64)
		if err != nil {
			return 0, 0, false
		}
		ticks += v
	}
	return pgrp, ticks, true
}
