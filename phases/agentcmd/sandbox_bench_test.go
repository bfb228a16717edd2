package agentcmd

import (
	"context"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/phases"
)

// BenchmarkSandboxStartup runs the same trivial agent (true) with and
// without the sandbox, in one run so that the two compare: the difference
// is what the sandbox costs each execution (bwrap's namespaces and mounts,
// the git discovery and the ref copy in a worktree). It reports both means
// and their ratio.
func BenchmarkSandboxStartup(b *testing.B) {
	if !New(Config{Sandbox: Sandbox{Mode: SandboxRequired}}).Sandboxed() {
		b.Skip("no OS sandbox here")
	}
	for _, where := range []string{"dir", "worktree"} {
		b.Run(where, func(b *testing.B) {
			ws := b.TempDir()
			if where == "worktree" {
				ws = benchWorktree(b)
			}
			benchSandbox(b, ws)
		})
	}
}

// benchWorktree is a story's worktree in a fresh repository.
func benchWorktree(b *testing.B) string {
	repo := b.TempDir()
	if _, err := testrepo.New(repo, "main", testrepo.Commit{Files: map[string]string{"README": "hello\n"}}); err != nil {
		b.Fatal(err)
	}
	wt := filepath.Join(repo, ".worktrees", "A")
	cmd := exec.Command("git", "worktree", "add", "-q", "-b", "foreman/A", wt)
	cmd.Dir, cmd.Env = repo, append(os.Environ(), testrepo.GitEnv()...)
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	return wt
}

func benchSandbox(b *testing.B, ws string) {
	drivers := map[SandboxMode]*Driver{}
	for _, m := range []SandboxMode{SandboxOff, SandboxRequired} {
		drivers[m] = New(Config{Argv: []string{"true"}, PromptVia: PromptStdin, Sandbox: Sandbox{Mode: m}})
	}
	run := func(mode SandboxMode) time.Duration {
		start := time.Now()
		res, err := drivers[mode].Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws}, nil)
		if err != nil || !res.Success {
			b.Fatalf("%s: %v %+v", mode, err, res)
		}
		return time.Since(start)
	}
	run(SandboxRequired) // the probe, once per driver
	var off, on time.Duration
	for b.Loop() {
		off += run(SandboxOff)
		on += run(SandboxRequired)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((off / n).Microseconds()), "µs-unsandboxed/op")
	b.ReportMetric(float64((on / n).Microseconds()), "µs-sandboxed/op")
	b.ReportMetric(float64(on)/float64(off), "ratio")
}

// BenchmarkBwrapAlone is bubblewrap's own cost: /bin/true started directly
// and inside bwrap with the options of every sandbox (baseBwrapArgs and a
// private /tmp, none of the driver's binds), alternately in one run.
func BenchmarkBwrapAlone(b *testing.B) {
	d := New(Config{Sandbox: Sandbox{Mode: SandboxRequired}})
	bwrap, err := d.sandboxBwrap()
	if err != nil {
		b.Skip(err)
	}
	run := func(argv ...string) time.Duration {
		start := time.Now()
		if out, err := exec.Command(argv[0], argv[1:]...).CombinedOutput(); err != nil {
			b.Fatalf("%v: %v: %s", argv, err, out)
		}
		return time.Since(start)
	}
	sandboxed := append(append([]string{bwrap}, baseBwrapArgs(false)...), "--tmpfs", "/tmp", "--", "/bin/true")
	var off, on time.Duration
	for b.Loop() {
		off += run("/bin/true")
		on += run(sandboxed...)
	}
	n := time.Duration(b.N)
	b.ReportMetric(float64((off / n).Microseconds()), "µs-direct/op")
	b.ReportMetric(float64((on / n).Microseconds()), "µs-bwrap/op")
	b.ReportMetric(float64(on)/float64(off), "ratio")
}

// BenchmarkSandboxDecoys is what the decoys cost a sandboxed execution:
// the driver as a team has it (a lease directory, the main checkout, the
// state directory and the worktree root hidden) in a story's worktree,
// with its decoys and with read-only tmpfs instead, alternately in one
// run. "true" writes nothing; "writes" puts three files in the main
// checkout and one in the state directory (refused without decoys).
func BenchmarkSandboxDecoys(b *testing.B) {
	benchTeamLayout(b, map[string]string{
		"true":   "true",
		"writes": `for f in a b c; do echo x > "$REPO/$f" || true; done; echo x > "$REPO/.foreman/db" || true`,
	}, "tmpfs", "decoys", func(d *Driver, on bool) { d.noDecoys = !on })
}

// BenchmarkSandboxOpenWatch is what telling the agent's opens of the
// decoys from the host's costs a sandboxed execution (root's fanotify
// group, its marks and the answer to each open), the driver as a team
// has it, with and without the open watch alternately in one run. "ls"
// lists the hidden main checkout and state directory and reads two
// canaries (each open waits for the driver's answer).
func BenchmarkSandboxOpenWatch(b *testing.B) {
	if w := newOpenWatch(); w == nil {
		b.Skip("no fanotify here (root only)")
	} else {
		w.stop()
	}
	benchTeamLayout(b, map[string]string{
		"true": "true",
		"ls":   `ls -aR "$REPO" "$REPO/.foreman" > /dev/null; cat "$REPO/.git-credentials" "$REPO/.foreman/.netrc"`,
	}, "inotify", "fanotify", func(d *Driver, on bool) { d.noOpenWatch = !on })
}

// benchTeamLayout runs each script (by name, sorted) as the agent of the
// driver as a team has it, in a story's worktree, with a feature set off
// and on alternately in one run, and reports both times and their ratio.
func benchTeamLayout(b *testing.B, scripts map[string]string, offName, onName string, set func(d *Driver, on bool)) {
	if !New(Config{Sandbox: Sandbox{Mode: SandboxRequired}}).Sandboxed() {
		b.Skip("no OS sandbox here")
	}
	for _, name := range slices.Sorted(maps.Keys(scripts)) {
		b.Run(name, func(b *testing.B) {
			ws := benchWorktree(b)
			repo := filepath.Dir(filepath.Dir(ws))
			state := filepath.Join(repo, ".foreman")
			agent := filepath.Join(b.TempDir(), "agent")
			if err := os.WriteFile(agent, []byte("#!/bin/sh\n"+scripts[name]+"\n"), 0o755); err != nil {
				b.Fatal(err)
			}
			newDriver := func(on bool) *Driver {
				d := New(Config{Argv: []string{agent}, PromptVia: PromptStdin, Env: []string{"REPO=" + repo},
					LeaseDir: filepath.Join(state, "leases"), Sandbox: Sandbox{Mode: SandboxRequired}}).
					WithHideNamed(state, "state directory").WithHideNamed(filepath.Join(repo, ".worktrees"), "worktree root").
					WithHideNamed(repo, "main checkout")
				set(d, on)
				return d
			}
			with, without := newDriver(true), newDriver(false)
			run := func(d *Driver) time.Duration {
				start := time.Now()
				if _, err := d.Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws}, nil); err != nil {
					b.Fatal(err)
				}
				return time.Since(start)
			}
			run(with) // the probe, once
			run(without)
			var off, on time.Duration
			for b.Loop() {
				off += run(without)
				on += run(with)
			}
			n := time.Duration(b.N)
			b.ReportMetric(float64((off / n).Microseconds()), "µs-"+offName+"/op")
			b.ReportMetric(float64((on / n).Microseconds()), "µs-"+onName+"/op")
			b.ReportMetric(float64(on)/float64(off), "ratio")
		})
	}
}
