package agentcmd_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentforeman/foreman/internal/realagent"
	"github.com/agentforeman/foreman/internal/testrepo"
	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// BenchmarkSandboxRealCLIStage is the sandbox's cost per stage with a real
// agent CLI: the same stage (the pinned CLI with -format alone, in a
// story's worktree, one model request answered by a modeltest server) run
// with the driver's sandbox off and on, alternately in one run, so that
// the two compare. It reports both means and their ratio. The CLI's own
// start-up dominates both.
func BenchmarkSandboxRealCLIStage(b *testing.B) {
	if !agentcmd.New(agentcmd.Config{Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxRequired}}).Sandboxed() {
		b.Skip("no OS sandbox here")
	}
	for _, cli := range []realagent.CLI{realagent.Claude, realagent.Codex} {
		b.Run(string(cli), func(b *testing.B) {
			bin := realagent.Require(b, cli)
			b.Setenv("PATH", filepath.Dir(bin)+string(os.PathListSeparator)+os.Getenv("PATH"))
			srv := modeltest.Start(b, modeltest.Script{Turns: []modeltest.Turn{modeltest.Say("done")}})
			ws := cliBenchWorktree(b)
			leases := filepath.Join(b.TempDir(), "leases")
			drivers := map[agentcmd.SandboxMode]*agentcmd.Driver{}
			for _, m := range []agentcmd.SandboxMode{agentcmd.SandboxOff, agentcmd.SandboxRequired} {
				drivers[m] = cliBenchDriver(b, cli, srv.URL(), m, leases)
			}
			run := func(m agentcmd.SandboxMode) time.Duration {
				start := time.Now()
				res, err := drivers[m].Execute(context.Background(), phases.AgentRequest{WorkspacePath: ws, TaskPrompt: "say done"}, nil)
				if err != nil || !res.Success {
					b.Fatalf("%s: %v %+v", m, err, res)
				}
				return time.Since(start)
			}
			run(agentcmd.SandboxOff) // each CLI's first run sets up its home
			run(agentcmd.SandboxRequired)
			var off, on time.Duration
			for b.Loop() {
				off += run(agentcmd.SandboxOff)
				on += run(agentcmd.SandboxRequired)
			}
			n := time.Duration(b.N)
			b.ReportMetric(float64((off / n).Milliseconds()), "ms-unsandboxed/op")
			b.ReportMetric(float64((on / n).Milliseconds()), "ms-sandboxed/op")
			b.ReportMetric(float64(on)/float64(off), "ratio")
		})
	}
}

// cliBenchDriver is cli's driver, -format alone, pointed at the server.
func cliBenchDriver(b *testing.B, cli realagent.CLI, url string, mode agentcmd.SandboxMode, leases string) *agentcmd.Driver {
	dir, err := realagent.Dir()
	if err != nil {
		b.Fatal(err)
	}
	modules, err := filepath.EvalSymlinks(filepath.Join(dir, ".."))
	if err != nil {
		b.Fatal(err)
	}
	cfg := agentcmd.Config{LeaseDir: leases, Env: testrepo.GitEnv(),
		Sandbox: agentcmd.Sandbox{Mode: mode, Binds: []agentcmd.Bind{{Source: modules}}}}
	switch cli {
	case realagent.Claude:
		cfg.Format = agentcmd.FormatClaude
		home := filepath.Join(b.TempDir(), "home")
		if err := os.MkdirAll(home, 0o700); err != nil {
			b.Fatal(err)
		}
		env := realagent.ClaudeEnv(url, home)
		if mode != agentcmd.SandboxOff {
			env = without(env, "HOME") // the sandbox's home, kept per worktree
		}
		cfg.Env = append(env, cfg.Env...)
	case realagent.Codex:
		cfg.Format = agentcmd.FormatCodex
		home := realagent.CodexHome(b)
		env, err := realagent.CodexEnv(url, home)
		if err != nil {
			b.Fatal(err)
		}
		if mode == agentcmd.SandboxOff {
			cfg.Env = append(env, cfg.Env...)
		} else {
			cfg.Sandbox.Binds = append(cfg.Sandbox.Binds, agentcmd.Bind{Source: filepath.Join(home, "config.toml"), Target: "~/.codex/config.toml"})
			cfg.Env = append(without(env, "HOME", "CODEX_HOME"), cfg.Env...)
		}
	}
	return agentcmd.New(cfg)
}

// cliBenchWorktree is a story's worktree in a fresh repository.
func cliBenchWorktree(b *testing.B) string {
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

func without(env []string, names ...string) []string {
	var keep []string
	for _, kv := range env {
		drop := false
		for _, n := range names {
			if len(kv) > len(n) && kv[:len(n)+1] == n+"=" {
				drop = true
			}
		}
		if !drop {
			keep = append(keep, kv)
		}
	}
	return keep
}
