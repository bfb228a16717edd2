// Command quickstart shows the whole of Foreman on real code in under a
// minute, offline: it creates a throwaway git repository holding a tiny Go
// module, plans six stories with dependencies between them, and runs each
// through the story flow (plan, validate, execute, quality gate, squash
// merge) with scripted agents that really edit Go files and commit, and a
// quality gate that really runs go vet and go test in the story's worktree.
//
//	go run ./examples/quickstart
//	go run ./examples/quickstart -keep -parallel 2
//	go run ./examples/quickstart -agent 'claude -p {prompt} --output-format stream-json --verbose' -format claude
//
// The task graph (package pipeline/taskgraph) decides which stories are
// ready and prints its status report as they move; each story runs on a
// pipeline.Runtime with a git worktree of its own (package merge). One
// story fails its quality gate once, is reworked with the gate's feedback
// and passes; one meets a real merge conflict with a story that landed
// first and is PAUSED with an escalation naming the file; the others merge,
// one squash commit each with a Foreman-Item trailer.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
)

type options struct {
	stories  int
	parallel int
	agent    string
	format   agentcmd.Format
	keep     bool
	// dir is where the run's directory is made; "" means the system's
	// temporary directory.
	dir     string
	timeout time.Duration
	verbose bool
}

func main() {
	o := options{}
	flag.Usage = usage
	flag.IntVar(&o.stories, "stories", 6, "number of stories to plan (1-20; the first six are the demo's, more are simple extras)")
	flag.IntVar(&o.parallel, "parallel", 3, "stories in flight at once (each has its own worktree and worker); the merge conflict needs 2 or more")
	flag.StringVar(&o.agent, "agent", "", "a real agent CLI for stages 0-2 instead of the scripted agents, split like a shell would;\nplaceholders {prompt} {workspace} {session}; the prompt says what the stage asks and the line to end with")
	flag.Func("format", "output format of -agent: text, claude or codex (default text)", func(s string) error {
		f, err := agentcmd.ParseFormat(s)
		o.format = f
		return err
	})
	flag.BoolVar(&o.keep, "keep", false, "keep the run's directory (repository, board, report, scripts); default: delete it")
	flag.DurationVar(&o.timeout, "timeout", 5*time.Minute, "wall-clock limit of the whole run")
	flag.BoolVar(&o.verbose, "v", false, "log the library's warnings and merges to stderr")
	flag.Parse()

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprint(flag.CommandLine.Output(), `quickstart plans six stories on a throwaway Go module and runs them through
Foreman's story flow with scripted agents, real gates (go vet, go test) and
real squash merges, printing the task graph's status as it goes and a
summary at the end.

  go run ./examples/quickstart             the demo (about 10-20 s)
  go run ./examples/quickstart -keep       keep the repository to look at its git log
  go run ./examples/quickstart -agent 'my-agent {prompt}'
                                           a real agent CLI does stages 0-2

Flags:
`)
	flag.PrintDefaults()
}

// outcome is what a run produced, for the summary and for tests.
type outcome struct {
	// Dir is the run's directory and Repo the repository in it; both are
	// gone unless options.keep.
	Dir, Repo string
	// Reports are the pipeline's run report files (FileReporter), oldest
	// first: one per UTC day on which a reported story started.
	Reports []string
	Stories []storyOutcome
	Wall    time.Duration
}

type storyOutcome struct {
	Story    *story
	Status   string // DONE, PAUSED, not started
	Commit   string
	Pause    *pipeline.Escalation
	Attempts []attempt
	Total    time.Duration
}

func (o options) validate() (argv []string, err error) {
	if o.stories < 1 || o.stories > 20 {
		return nil, fmt.Errorf("-stories %d: want 1 to 20", o.stories)
	}
	if o.parallel < 1 {
		return nil, fmt.Errorf("-parallel %d: want at least 1", o.parallel)
	}
	if o.agent != "" {
		if argv, err = demo.SplitWords(o.agent); err != nil {
			return nil, fmt.Errorf("-agent: %w", err)
		}
	}
	return argv, nil
}

// printer serializes the run's output and stamps event lines with the time
// since the start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) item(id foreman.ItemID, format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "%5.1fs  %-7s %s\n", time.Since(p.start).Seconds(), id, fmt.Sprintf(format, args...))
}

func (p *printer) block(text string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, "\n%s\n", strings.TrimRight(text, "\n")+"\n")
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

func logger(verbose bool) *slog.Logger {
	if !verbose {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

func round(d time.Duration) time.Duration {
	if d < time.Second {
		return d.Round(time.Millisecond)
	}
	return d.Round(100 * time.Millisecond)
}

func short(commit string) string {
	if len(commit) > 7 {
		return commit[:7]
	}
	return commit
}

var errTimeout = errors.New("the run took longer than -timeout")
