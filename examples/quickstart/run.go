package main

import (
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/internal/gitexec"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// run creates the demo repository, runs every story and prints the
// summary. The returned error is a system fault; stories that pause are
// part of the outcome.
func run(ctx context.Context, o options, out io.Writer) (res outcome, err error) {
	argv, err := o.validate()
	if err != nil {
		return res, err
	}
	began := time.Now()
	log := &printer{w: out, start: began}
	dir, err := os.MkdirTemp(o.dir, "foreman-quickstart-")
	if err != nil {
		return res, err
	}
	res.Dir, res.Repo = dir, filepath.Join(dir, "repo")
	defer func() {
		if o.keep {
			return
		}
		if rmErr := os.RemoveAll(dir); rmErr != nil && err == nil {
			err = rmErr
		}
	}()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, errTimeout)
	defer cancel()

	stories := demoStories(o.stories)
	boards, scripts := filepath.Join(dir, "board"), filepath.Join(dir, "agents")
	if err := prepare(ctx, res.Repo, boards, scripts, stories); err != nil {
		return res, err
	}
	mgr, err := merge.New(ctx, merge.Config{Repo: res.Repo, GitEnv: demo.IsolatedGitConfig(), Author: merge.Identity{Name: demo.Identity().Name, Email: demo.Identity().Email}, Logger: logger(o.verbose)})
	if err != nil {
		return res, err
	}
	git := pipeline.Git{Manager: mgr, Logger: logger(o.verbose)}

	var (
		faultMu sync.Mutex
		fault   error
	)
	runCtx, stopRun := context.WithCancel(ctx)
	defer stopRun()
	fail := func(err error) {
		faultMu.Lock()
		if fault == nil {
			fault = err
		}
		faultMu.Unlock()
		stopRun()
	}
	coord := newCoordinator(stories, log, fail)
	agent := &stageAgent{
		stories: coord.stories, boards: boards, scripts: scripts, leases: filepath.Join(dir, "leases"), argv: argv, format: o.format, log: log,
		showOutput: o.agent == "" || o.verbose,
		verifier:   gates.NewVerifier(gates.VerifierConfig{DefaultTimeout: 2 * time.Minute}), plan: gatePlan(),
	}
	spawner, err := pipeline.NewAgentSpawner(pipeline.AgentSpawnerConfig{
		Agent: agent, Workspace: mgr.Path, Inbox: coord, Logger: logger(o.verbose),
		Prompt: func(r pipeline.SpawnRequest) string { return prompt(coord.stories, boards, r) },
	})
	if err != nil {
		return res, err
	}
	defer spawner.Close()
	var escalations []pipeline.Escalation
	var escMu sync.Mutex
	reporter := &reportFiles{FileReporter: &pipeline.FileReporter{Root: dir, Diff: git}}
	db := store.NewMemory(store.MemoryOptions{})
	coord.pipe, err = pipeline.NewRuntime(pipeline.RuntimeConfig{
		Store: db, Spawner: spawner, Messenger: spawner, Worktrees: git, Merger: git,
		Board: storyBoards(boards),
		Escalator: pipeline.EscalatorFunc(func(_ context.Context, e pipeline.Escalation) error {
			escMu.Lock()
			defer escMu.Unlock()
			escalations = append(escalations, e)
			return nil
		}),
		Reporter: reporter,
		Logger:   logger(o.verbose),
	})
	if err != nil {
		return res, err
	}
	coord.graph, err = taskgraph.NewRuntime(taskgraph.Config{
		Store: db, Spawner: coord, Core: taskgraph.CoreConfig{MaxActive: o.parallel}, Logger: logger(o.verbose),
	})
	if err != nil {
		return res, err
	}
	if _, err := coord.graph.Create(ctx, session, "foreman", "quickstart", graphTasks(stories)); err != nil {
		return res, err
	}

	printPlan(log, res.Repo, stories, o)
	graphDone := make(chan error, 1)
	go func() { graphDone <- coord.graph.Run(runCtx, session, coord.wakeups, coord.onResult(runCtx)) }()
	coord.wakeups <- taskgraph.WakeUp{Text: "start"}

	select {
	case <-coord.finished:
	case <-runCtx.Done():
	}
	stopRun()
	if gerr := <-graphDone; gerr != nil && !errors.Is(gerr, context.Canceled) {
		fail(gerr)
	}
	spawner.Close()
	coord.wg.Wait()
	faultMu.Lock()
	if fault == nil && ctx.Err() != nil {
		fault = context.Cause(ctx)
	}
	err = fault
	faultMu.Unlock()

	// A story paused on a merge conflict keeps its worktree for the person
	// who resolves it; the demo removes it (its branch stays).
	cleanCtx, cancelClean := context.WithTimeout(context.Background(), time.Minute)
	defer cancelClean()
	if wts, lerr := mgr.List(cleanCtx); lerr == nil {
		for _, wt := range wts {
			if rerr := mgr.Remove(cleanCtx, wt.ID); rerr != nil && err == nil {
				err = rerr
			}
		}
	} else if err == nil {
		err = lerr
	}
	if err != nil {
		return res, err
	}

	res.Wall = time.Since(began)
	res.Reports = reporter.paths()
	res.Stories = outcomes(stories, coord.snapshot(), agent.attemptList(), escalations)
	report(ctx, log, res, o, escalations, mgr)
	return res, nil
}

// prepare makes the repository, the board directory and the scripts.
func prepare(ctx context.Context, repo, boards, scripts string, stories []*story) error {
	if err := demo.NewGoModuleRepo(ctx, repo); err != nil {
		return err
	}
	for _, d := range []string{boards, scripts} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			return err
		}
	}
	for _, s := range stories {
		body, err := scriptFor(s)
		if err != nil {
			return err
		}
		if _, err := demo.WriteScript(scripts, string(s.ID)+".sh", body); err != nil {
			return err
		}
	}
	return nil
}

func graphTasks(stories []*story) []taskgraph.TaskSpec {
	specs := make([]taskgraph.TaskSpec, len(stories))
	for i, s := range stories {
		specs[i] = taskgraph.TaskSpec{Subject: string(s.ID), Role: role, Description: s.Title}
		for _, b := range s.BlockedBy {
			specs[i].BlockedBy = append(specs[i].BlockedBy, string(b))
		}
	}
	return specs
}

// storyBoards is the board: one FileBoard file per story, so that agents
// of different stories, which run at the same time, never write the same
// file.
type storyBoards string

func (d storyBoards) Story(ctx context.Context, item foreman.ItemID) (pipeline.BoardStory, error) {
	return pipeline.NewFileBoard(boardPath(string(d), item)).Story(ctx, item)
}

func (d storyBoards) SetStatus(ctx context.Context, item foreman.ItemID, status string) error {
	return pipeline.NewFileBoard(boardPath(string(d), item)).SetStatus(ctx, item, status)
}

// reportFiles is the run's Reporter: a FileReporter that remembers the
// files it wrote. FileReporter names a story's file after the UTC day that
// story started, so a run that straddles midnight writes two.
type reportFiles struct {
	*pipeline.FileReporter
	mu      sync.Mutex
	written []string
}

func (r *reportFiles) AppendReport(ctx context.Context, e pipeline.ReportEntry) error {
	if err := r.FileReporter.AppendReport(ctx, e); err != nil {
		return err
	}
	path := r.Path(e.State.Started)
	r.mu.Lock()
	defer r.mu.Unlock()
	if !slices.Contains(r.written, path) {
		r.written = append(r.written, path)
	}
	return nil
}

// paths returns the report files written, oldest day first.
func (r *reportFiles) paths() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Sorted(slices.Values(r.written))
}

func printPlan(log *printer, repo string, stories []*story, o options) {
	log.printf("Foreman quickstart: %d stories on a throwaway Go module, %d in flight at once\nrepository %s\n\n", len(stories), o.parallel, repo)
	for _, s := range stories {
		deps := ""
		if len(s.BlockedBy) > 0 {
			var b []string
			for _, d := range s.BlockedBy {
				b = append(b, string(d))
			}
			deps = "  (after " + strings.Join(b, ", ") + ")"
		}
		log.printf("  %s  %s%s\n", s.ID, s.Title, deps)
	}
	if o.agent == "" {
		log.printf("\nScripted agents: US-003's first implementation has a bug the quality gate catches; US-002 changes\nthe line of calc.go that US-001 changes, and lands second.\n")
		if o.parallel < 2 {
			log.printf("With -parallel 1, US-002 starts after US-001 has landed, so there is no conflict to show.\n")
		}
	}
	log.printf("\n")
}

func (a *stageAgent) attemptList() []attempt {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]attempt(nil), a.attempts...)
}

// gitLog returns main's log, one line per commit with its trailer.
func gitLog(ctx context.Context, repo string) (string, error) {
	git := gitexec.Runner{}
	return git.Run(ctx, repo, "log", "--format=%h %s  %(trailers:key=Foreman-Item,separator=%x2C )", "main")
}
