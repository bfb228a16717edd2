package agentcmd

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/phases"
)

// writeScript writes an executable shell script and returns its path.
func writeScript(t *testing.T, dir, name, body string) string {
	t.Helper()
	path := filepath.Join(dir, name)
	require.NoError(t, os.WriteFile(path, []byte("#!/bin/sh\n"+body), 0o755))
	return path
}

// recorder collects the events of one execution. The driver calls it from
// the goroutine running Execute, one event at a time.
type recorder struct {
	events []phases.StreamEvent
	// on, when set, runs for every event after it is recorded.
	on func(phases.StreamEvent)
}

func (r *recorder) callback(ev phases.StreamEvent) {
	r.events = append(r.events, ev)
	if r.on != nil {
		r.on(ev)
	}
}

func (r *recorder) lines(kind phases.StreamKind) []string {
	var out []string
	for _, ev := range r.events {
		if ev.Kind == kind {
			out = append(out, ev.Line)
		}
	}
	return out
}

// stdoutLines are the lines of every event not from stderr, in order.
func (r *recorder) stdoutLines() []string {
	var out []string
	for _, ev := range r.events {
		if ev.Kind != phases.StreamStderr && ev.Kind != phases.StreamSandbox {
			out = append(out, ev.Line)
		}
	}
	return out
}

// liveGroupMembers lists the processes of group pgid that are still running
// (zombies, which only wait to be reaped, do not count). It reads /proc, so
// it also sees processes that re-parented away from the agent.
func liveGroupMembers(t *testing.T, pgid int) []int {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	require.NoError(t, err)
	var live []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue // exited while we looked
		}
		// pid (comm) state ppid pgrp ...; comm may hold spaces and parens.
		s := string(stat)
		fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
		if len(fields) < 3 {
			continue
		}
		state, pgrp := fields[0], fields[2]
		if pgrp == strconv.Itoa(pgid) && state != "Z" && state != "X" {
			live = append(live, pid)
		}
	}
	return live
}

// processRunning reports whether pid exists and is not a zombie.
func processRunning(pid int) bool {
	if err := syscall.Kill(pid, 0); err != nil {
		return false
	}
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	s := string(stat)
	fields := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(fields) > 0 && fields[0] != "Z" && fields[0] != "X"
}

// pidFromLine parses lines like "pid 1234".
func pidFromLine(t *testing.T, lines []string, label string) int {
	t.Helper()
	for _, l := range lines {
		if v, ok := strings.CutPrefix(l, label+" "); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			require.NoError(t, err)
			return pid
		}
	}
	require.Failf(t, "no pid line", "no %q line in %q", label, lines)
	return 0
}

// startedGroup records the agent's process group from OnStart: inside a
// sandbox, $$ is the agent's pid in a namespace of its own, not the host's.
type startedGroup struct{ pid atomic.Int64 }

func (g *startedGroup) onStart(pid int) { g.pid.Store(int64(pid)) }

func (g *startedGroup) get(t *testing.T) int {
	t.Helper()
	pid := int(g.pid.Load())
	require.NotZero(t, pid, "OnStart was not called")
	return pid
}

// sandboxedHere reports whether a default driver runs its agents in the
// sandbox on this machine (bwrap installed, FOREMAN_SANDBOX not off): pids
// an agent prints are then its namespace's, not the host's.
func sandboxedHere() bool { return New(Config{}).Sandboxed() }
