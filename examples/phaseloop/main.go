// Command phaseloop runs one agent's build → snapshot → verify → feedback
// loop and prints each phase with its duration and the final outcome.
//
// With no flags it creates a throwaway git repository holding a tiny Go
// module and runs a scripted agent (a shell script that really edits Go files
// and commits) against real gates (go vet, go test): the first attempt fails
// its tests, the feedback names the failing test, and the second passes.
//
//	go run ./examples/phaseloop
//	go run ./examples/phaseloop -dir ~/src/myrepo -format claude \
//	    -prompt 'Make the failing tests pass' -gate 'go test ./...'
//
// With -dir the agent works in that repository's working tree in place (no
// worktree is made): commit or stash your own changes first.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/phases/gitsnap"
)

type options struct {
	dir, agent, prompt string
	format             agentcmd.Format
	promptSet          bool
	gates              []string
	maxIterations      int
	timeout            time.Duration
	keep, quiet        bool
}

func main() {
	var o options
	flag.Usage = usage
	flag.StringVar(&o.dir, "dir", "", "run in this git repository's working tree, in place, instead of a throwaway demo repo (requires -prompt)")
	flag.StringVar(&o.agent, "agent", "", "agent command line, run by sh (quotes work); placeholders {prompt} {feedback} {session} {workspace} {iteration} become its arguments\n(default: the demo's scripted agent, or the -format's own command: claude -p ... / codex exec --json)")
	flag.Func("format", "agent output format: text, claude (Claude Code stream-json) or codex (codex exec --json) (default text)", func(s string) error {
		f, err := agentcmd.ParseFormat(s)
		o.format = f
		return err
	})
	flag.StringVar(&o.prompt, "prompt", demoPrompt, "the task prompt")
	flag.Func("gate", "an L1 gate command line, run by sh (repeatable; default: go vet, then go test)", func(s string) error {
		if err := shellCheck(s); err != nil {
			return err
		}
		o.gates = append(o.gates, s)
		return nil
	})
	flag.IntVar(&o.maxIterations, "max-iterations", 3, "iterations before the run fails")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "wall-clock limit of the whole run")
	flag.BoolVar(&o.keep, "keep", false, "keep the throwaway repository")
	flag.BoolVar(&o.quiet, "quiet", false, "do not echo the agent's output")
	flag.Parse()
	flag.Visit(func(f *flag.Flag) { o.promptSet = o.promptSet || f.Name == "prompt" })

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	ok, err := run(ctx, o, os.Stdout)
	if err != nil {
		fmt.Fprintln(os.Stderr, "phaseloop:", err)
		os.Exit(2)
	}
	if !ok {
		os.Exit(1)
	}
}

// run executes the loop and reports whether it succeeded.
func run(ctx context.Context, o options, out io.Writer) (bool, error) {
	ws, argv, cleanup, err := prepare(ctx, o, out)
	if err != nil {
		return false, err
	}
	defer cleanup()

	loop := phases.NewRunLoop(phases.Config{
		Services: phases.PhaseServices{
			AgentDriver: agentcmd.New(agentcmd.Config{
				Argv: argv, Format: o.format, Env: gitEnv(),
			}),
			Snapshotter:       gitsnap.New(gitsnap.Config{Env: isolatedGit()}),
			Verifier:          gates.NewVerifier(gates.VerifierConfig{}),
			FeedbackGenerator: gates.NewFeedbackGenerator(gates.FeedbackConfig{}),
		},
		Limits: phases.Limits{MaxIterations: o.maxIterations, MaxWallClock: o.timeout},
	})
	fmt.Fprintf(out, "workspace %s\ntask      %s\n\n", ws, o.prompt)
	res, err := loop.Run(ctx, phases.RunRequest{
		ItemID: "phaseloop", WorkspacePath: ws,
		Task: phases.TaskSpec{Prompt: o.prompt, GatePlan: gatePlan(o.gates)},
		Stream: func(e phases.StreamEvent) {
			if !o.quiet {
				fmt.Fprintf(out, "    │ %s\n", firstNonEmpty(e.Text, e.Line))
			}
		},
	})
	if err != nil {
		return false, err
	}
	report(out, res)
	return res.Succeeded(), nil
}

// prepare returns the workspace and agent argv, creating the demo repo and
// scripted agent when no directory or agent is given.
func prepare(ctx context.Context, o options, out io.Writer) (ws string, argv []string, cleanup func(), err error) {
	cleanup = func() {}
	ws = o.dir
	if ws == "" {
		tmp, err := os.MkdirTemp("", "foreman-phaseloop-")
		if err != nil {
			return "", nil, nil, err
		}
		cleanup = func() {
			if o.keep {
				fmt.Fprintf(out, "\nrepository kept at %s (git -C %s log --oneline)\n", tmp, filepath.Join(tmp, "repo"))
				return
			}
			os.RemoveAll(tmp)
		}
		ws = filepath.Join(tmp, "repo")
		if err := newRepo(ctx, ws); err != nil {
			cleanup()
			return "", nil, nil, err
		}
		if o.agent == "" {
			script := filepath.Join(tmp, "agent.sh")
			if err := os.WriteFile(script, []byte(agentScript), 0o755); err != nil {
				cleanup()
				return "", nil, nil, err
			}
			argv = []string{script, "{prompt}"}
		}
	} else {
		if !o.promptSet {
			return "", nil, nil, errors.New("-dir needs -prompt: the default prompt is the demo's task")
		}
		if ws, err = filepath.Abs(ws); err != nil {
			return "", nil, nil, err
		}
	}
	if o.agent != "" {
		if argv, err = shellArgv(o.agent); err != nil {
			cleanup()
			return "", nil, nil, fmt.Errorf("-agent: %w", err)
		}
	}
	if len(argv) == 0 && (o.format == "" || o.format == agentcmd.FormatText) {
		cleanup()
		return "", nil, nil, errors.New("-dir needs -agent (or -format claude / codex, which have a default command): there is no scripted agent for your repository")
	}
	return ws, argv, cleanup, nil
}

func gatePlan(commands []string) phases.GatePlan {
	if len(commands) == 0 {
		return phases.GatePlan{Levels: []phases.GateLevel{
			{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}}}},
			{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "./..."}}}},
		}}
	}
	level := phases.GateLevel{Level: phases.L1Tests}
	for i, c := range commands {
		level.Checks = append(level.Checks, phases.GateCheck{Name: fmt.Sprintf("gate-%d", i+1), Argv: []string{"sh", "-c", c}})
	}
	return phases.GatePlan{Levels: []phases.GateLevel{level}}
}

func report(out io.Writer, res phases.RunResult) {
	fmt.Fprintln(out)
	for _, it := range res.Iterations {
		fmt.Fprintf(out, "iteration %d  (%s)  → %s\n", it.Iteration, round(it.Duration), it.Result.StateTransition)
		p := it.Result.Phases
		if p.Build != nil {
			detail := "ok"
			if a := p.Build.AgentResult; a != nil {
				detail = fmt.Sprintf("exit %d, %d tokens, $%.4f", a.ExitCode, a.Tokens.Total(), a.CostUSD)
				if a.SessionID != "" {
					detail += ", session " + a.SessionID
				}
			}
			if e := p.Build.BuildError; e != nil {
				detail += ": " + e.Message
			} else if e := p.Build.Error; e != nil {
				detail += ": " + e.Message
			}
			phaseLine(out, "build", p.Build.PhaseResult, detail)
		}
		if p.Snapshot != nil {
			detail := ""
			if s := p.Snapshot.Snapshot; s != nil {
				detail = fmt.Sprintf("%d commits, %d files, +%d -%d", len(s.Commits), len(s.Files), s.Insertions, s.Deletions)
			}
			phaseLine(out, "snapshot", p.Snapshot.PhaseResult, detail)
		}
		if p.Verify != nil {
			detail := "passed"
			if !p.Verify.AllPassed {
				var failed []string
				if p.Verify.Report != nil {
					for _, c := range p.Verify.Report.FailedChecks() {
						failed = append(failed, string(c.Level)+"/"+c.Name)
					}
				}
				detail = "failed: " + strings.Join(failed, ", ")
			}
			phaseLine(out, "verify", p.Verify.PhaseResult, detail)
		}
		if p.Feedback != nil {
			phaseLine(out, "feedback", p.Feedback.PhaseResult, fmt.Sprintf("%d bytes for the next iteration:", len(p.Feedback.Feedback)))
			for _, line := range strings.Split(strings.TrimSpace(p.Feedback.Feedback), "\n") {
				fmt.Fprintf(out, "      ┆ %s\n", line)
			}
		}
	}
	fmt.Fprintf(out, "\noutcome   %s (%s) after %d iterations in %s\n", res.State, res.Reason, len(res.Iterations), round(res.Duration))
	fmt.Fprintf(out, "usage     %d tokens (in %d, out %d, cache %d), $%.4f", res.Tokens.Total(), res.Tokens.Input, res.Tokens.Output, res.Tokens.CacheRead+res.Tokens.CacheWrite, res.CostUSD)
	if res.SessionID != "" {
		fmt.Fprintf(out, ", session %s", res.SessionID)
	}
	fmt.Fprintln(out)
	if res.Message != "" {
		fmt.Fprintf(out, "          %s\n", res.Message)
	}
}

func phaseLine(out io.Writer, name string, r phases.PhaseResult, detail string) {
	mark := "✓"
	if !r.Success {
		mark = "✗"
	}
	fmt.Fprintf(out, "  %s %-9s %8s  %s\n", mark, name, round(r.Duration), detail)
}

const demoPrompt = "Add an Add function with a test."

func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `phaseloop runs one agent's build → snapshot → verify → feedback loop.

  go run ./examples/phaseloop
      the demo: a throwaway repo, a scripted agent, go vet + go test as gates
  go run ./examples/phaseloop -dir ~/src/repo -format claude -prompt 'Make the failing tests pass' -gate 'go test ./...'
      Claude Code on your repository (its working tree is edited in place)
  go run ./examples/phaseloop -dir ~/src/repo -agent './my-agent.sh {prompt}' -prompt '...' -gate 'make check'
      any agent command; it gets the prompt (with feedback after a failed iteration) as {prompt}

Exit status: 0 succeeded, 1 the run failed, 2 bad usage or a system fault.

Flags:
`)
	flag.PrintDefaults()
}

func round(d time.Duration) time.Duration { return d.Round(time.Millisecond) }

func firstNonEmpty(a, b string) string {
	if a != "" {
		return a
	}
	return b
}
