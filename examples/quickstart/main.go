// Command quickstart shows the whole of Foreman on real code in under a
// minute, offline: it creates a throwaway git repository holding a tiny Go
// module, plans six stories with dependencies between them, and hands them
// to a team (package pipeline/team) of scripted agents that really edit Go
// files and commit, checked by gates that really run go vet and go test in
// each story's worktree.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -keep -parallel 2
//	go run ./examples/quickstart -agent 'claude -p {prompt} --output-format stream-json --verbose' -format claude
//	go run ./examples/quickstart -real claude   # real Claude Code, a scripted model (after .ci/install-agents)
//
// Each story goes through the story flow (plan, validate, build, quality
// gate, squash merge) in a git worktree of its own. US-003's first build
// fails the gates, and the agent fixes it from the gates' feedback; US-002
// meets a real merge conflict with a story that landed first: the team
// rebases it (the rebase conflicts too), gives it back to its agent once
// with both sides, and, as the scripted agent keeps its own line, pauses it
// with an escalation naming the file; the others merge, one squash commit
// each with a Foreman-Item trailer. The team's status is printed as it
// changes.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

type options struct {
	stories  int
	parallel int
	agent    string
	format   agentcmd.Format
	// real names a real agent CLI (claude, codex) to run against a
	// scripted model server started in this process.
	real string
	keep bool
	// dir is where the run's directory is made; "" means the system's
	// temporary directory.
	dir     string
	timeout time.Duration
}

func main() {
	o := options{}
	flag.Usage = usage
	flag.IntVar(&o.stories, "stories", 6, "number of stories to plan (1-20; the first six are the demo's, more are simple extras)")
	flag.IntVar(&o.parallel, "parallel", 3, "stories in flight at once (the team's Workers); the merge conflict needs 2 or more")
	flag.StringVar(&o.agent, "agent", "", "a real agent CLI instead of the scripted agent, run by sh (so quotes work); agentcmd's placeholders\n({prompt} {workspace} {session} ...) become its arguments; the prompt says what the stage asks and how to report")
	flag.Func("format", "output format of the agent: text, claude, codex or gemini (default text); with no -agent, claude, codex and gemini run their own CLI", func(s string) error {
		f, err := agentcmd.ParseFormat(s)
		o.format = f
		return err
	})
	flag.StringVar(&o.real, "real", "", "claude or codex: the real agent CLI (as .ci/install-agents installs it) does the stories' work,\nagainst a scripted model server in this process: real Claude Code at work, with no account, key or network")
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (repository, the team's state in repo/.foreman, the agent script)")
	flag.DurationVar(&o.timeout, "timeout", 10*time.Minute, "wall-clock limit of the whole run")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `quickstart plans six stories on a throwaway Go module and has a team of
scripted agents work through them: real git worktrees, real gates (go vet,
go test), real squash merges, the team's status as it changes and a summary.

  go run ./examples/quickstart             the demo (about a minute)
  go run ./examples/quickstart -keep       keep the repository to look at its git log
  go run ./examples/quickstart -agent 'my-agent {prompt}'
                                           a real agent CLI does the work
  go run ./examples/quickstart -real claude
                                           real Claude Code (or codex) does the work, its model a
                                           script served in this process: no account needed
                                           (run .ci/install-agents once first)

Flags:
`)
	flag.PrintDefaults()
}

// outcome is what a run produced, for the summary and for tests.
type outcome struct {
	// Dir is the run's directory and Repo the repository in it; both are
	// gone unless options.keep.
	Dir, Repo string
	Result    team.Result
	Events    []team.Event
	Wall      time.Duration
}

// validate checks the options and returns the -agent command to run.
func (o options) validate() ([]string, error) {
	switch {
	case o.stories < 1 || o.stories > 20:
		return nil, fmt.Errorf("-stories %d: want 1 to 20", o.stories)
	case o.parallel < 1:
		return nil, fmt.Errorf("-parallel %d: want at least 1", o.parallel)
	case o.real != "" && (o.agent != "" || o.format != ""):
		return nil, errors.New("-real runs its own CLI: leave out -agent and -format")
	case o.real != "":
		if _, _, ok := realCLI(o.real); !ok {
			return nil, fmt.Errorf("-real %q: claude or codex", o.real)
		}
		return nil, nil
	case o.agent == "":
		return nil, nil
	}
	argv, err := shellArgv(o.agent)
	if err != nil {
		return nil, fmt.Errorf("-agent: %w", err)
	}
	return argv, nil
}

// gatePlan is what every story's work must pass: go vet (L0), then go test
// (L1). The team runs it after each build and again as the quality gate.
//
// The gates run the story's code, so they run in the agent's sandbox, where
// Go's build cache is the story's own and every story's first gate
// compiles the standard library's packages again (15 s and more). The
// demo's agents are scripts of ours, so its gates share one build cache,
// buildCache (env is GOCACHE's setting, "" where there is none). Never
// share the host's own cache with agents a stranger can steer: what one
// writes there, every later build trusts.
func gatePlan(env []string) phases.GatePlan {
	return phases.GatePlan{Levels: []phases.GateLevel{
		{Level: phases.L0Contracts, Checks: []phases.GateCheck{{Name: "vet", Argv: []string{"go", "vet", "./..."}, Env: env}}},
		{Level: phases.L1Tests, Checks: []phases.GateCheck{{Name: "test", Argv: []string{"go", "test", "-count=1", "./..."}, Env: env}}},
	}}
}

// buildCache is the Go build cache the demo's gates share, a directory of
// its own under the user's cache directory (not the host's Go cache): the
// sandbox's bind of it and the gates' environment; none where it cannot
// be made.
func buildCache() ([]agentcmd.Bind, []string) {
	dir, err := os.UserCacheDir()
	if err != nil {
		return nil, nil
	}
	dir = filepath.Join(dir, "foreman-quickstart", "go-build")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil
	}
	return []agentcmd.Bind{{Source: dir, Writable: true}}, []string{"GOCACHE=" + dir}
}

// run makes the demo repository, has the team work through the stories and
// prints the summary. The returned error is a system fault; stories that
// pause are part of the outcome.
func run(ctx context.Context, o options, out io.Writer) (res outcome, err error) {
	argv, err := o.validate()
	if err != nil {
		return res, err
	}
	began := time.Now()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, errors.New("the run took longer than -timeout"))
	defer cancel()
	if res.Dir, err = os.MkdirTemp(o.dir, "foreman-quickstart-"); err != nil {
		return res, err
	}
	defer func() {
		if o.keep {
			return
		}
		if rmErr := os.RemoveAll(res.Dir); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	res.Repo = filepath.Join(res.Dir, "repo")
	stories := demoStories(o.stories)
	if err := newRepo(ctx, res.Repo); err != nil {
		return res, err
	}
	agent := agentcmd.Config{Argv: argv, Format: o.format, Env: gitEnv(), Sandbox: agentSandbox(o.agent)}
	var onEvent func(team.Event)
	if o.real != "" {
		ra, err := startReal(o.real, res.Dir, stories)
		if err != nil {
			return res, err
		}
		defer ra.close()
		agent, onEvent = ra.cfg, ra.onEvent
	} else if o.agent == "" && (o.format == "" || o.format == agentcmd.FormatText) {
		script := filepath.Join(res.Dir, "agent.sh")
		if err := os.WriteFile(script, []byte(agentScript(stories)), 0o755); err != nil {
			return res, err
		}
		agent.Argv = []string{script, "{prompt}"}
	}

	cacheBinds, cacheEnv := buildCache()
	agent.Sandbox.Binds = append(agent.Sandbox.Binds, cacheBinds...)

	p := &printer{w: out, start: began}
	tm, err := team.New(ctx, team.Config{
		Repo:     res.Repo,
		Agent:    agentcmd.New(agent),
		Gates:    gatePlan(cacheEnv),
		Workers:  o.parallel,
		Merge:    mergeConfig(),
		Feedback: gateWatch{p},
		OnEvent:  onEvent,
	})
	if err != nil {
		return res, err
	}
	defer tm.Close()
	plan := make([]team.Story, len(stories))
	for i, s := range stories {
		plan[i] = s.Story
	}
	if err := tm.Add(ctx, plan...); err != nil {
		return res, err
	}
	p.plan(res.Repo, plan, o)
	watched := make(chan []team.Event)
	go func() { watched <- p.watch(ctx, tm) }()
	res.Result, err = tm.Run(ctx)
	res.Events = <-watched
	res.Wall = time.Since(began)
	if err != nil {
		return res, err
	}
	p.summary(ctx, tm, res, o)
	return res, nil
}

// shellCheck reports a command line sh cannot parse, in sh's words.
func shellCheck(cmdline string) error {
	if out, err := exec.Command("sh", "-n", "-c", cmdline).CombinedOutput(); err != nil {
		return fmt.Errorf("%s (%w)", strings.TrimSpace(string(out)), err)
	}
	return nil
}

// shellArgv runs an agent command line with sh, which splits it (quotes
// and all) as the user's shell would. agentcmd's placeholders become sh's
// positional arguments, so a prompt is never pasted into the command line;
// with none of {prompt}, {task} and {feedback}, the prompt comes last, as
// agentcmd would put it.
func shellArgv(cmdline string) ([]string, error) {
	if err := shellCheck(cmdline); err != nil {
		return nil, err
	}
	names := []string{"prompt", "task", "feedback", "session", "workspace", "iteration"}
	line, vars := cmdline, ""
	argv := []string{"sh", "-c", "", "agent"}
	for i, n := range names {
		line = strings.ReplaceAll(line, "{"+n+"}", `"$`+n+`"`)
		vars += fmt.Sprintf("%s=$%d ", n, i+1)
		argv = append(argv, "{"+n+"}")
	}
	if !strings.Contains(cmdline, "{prompt}") && !strings.Contains(cmdline, "{task}") && !strings.Contains(cmdline, "{feedback}") {
		line += ` "$prompt"`
	}
	// "$@" carries the arguments agentcmd adds after the command (a resume).
	argv[2] = vars + "; shift " + fmt.Sprint(len(names)) + "; " + line + ` "$@"`
	return argv, nil
}

// agentSandbox lets the agents' OS sandbox see the program an -agent
// command line names (sh runs the line, so the driver cannot tell which
// program it is): its directory, read-only, when it is a file's path.
func agentSandbox(cmdline string) agentcmd.Sandbox {
	words, err := agentcmd.SplitCommand(cmdline)
	if err != nil || len(words) == 0 || !strings.ContainsRune(words[0], filepath.Separator) {
		return agentcmd.Sandbox{}
	}
	abs, err := filepath.Abs(words[0])
	if err != nil {
		return agentcmd.Sandbox{}
	}
	if fi, err := os.Stat(abs); err != nil || fi.IsDir() {
		return agentcmd.Sandbox{}
	}
	return agentcmd.Sandbox{Binds: []agentcmd.Bind{{Source: filepath.Dir(abs)}}}
}
