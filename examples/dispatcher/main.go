// Command dispatcher shows the worker pool of package worker on
// scripted agents in a throwaway git repository: four items, three pooled
// workers, the default in-process Runtime supervising each agent process
// and heartbeating for it, and short timeouts so that it all happens in a
// few seconds.
//
//	go run ./examples/dispatcher
//
// US-101 is done at once. US-102 needs a reviewer's approval: the reviewer
// rejects its first attempt for a missing doc comment, and the second
// attempt, whose prompt carries that feedback, is approved. US-103's agent
// keeps running (so its worker heartbeats) but never commits: after the
// progress timeout it is escalated STUCK_WORKER, killed and requeued, and
// after the second stall parked. US-104's reviewer rejects it twice: the
// second rejection escalates REVIEW_LIMIT and parks it.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/worker"
)

type options struct {
	// progress is worker.Config.ProgressTimeout; liveness and heartbeat
	// intervals are derived from it.
	progress time.Duration
	keep     bool
	dir      string
	timeout  time.Duration
}

func main() {
	o := options{}
	flag.DurationVar(&o.progress, "progress-timeout", 2*time.Second, "worker.Config.ProgressTimeout (the library's default is 15m)")
	flag.BoolVar(&o.keep, "keep", false, "keep the throwaway repository")
	flag.DurationVar(&o.timeout, "timeout", 2*time.Minute, "wall-clock limit of the whole run")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if _, err := run(ctx, o, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "dispatcher:", err)
		os.Exit(1)
	}
}

// item is one piece of work and its scripted agent.
type item struct {
	ID     foreman.ItemID
	Prompt string
	Review bool
	Script string
	// approve decides the review from the worktree; nil means never reviewed.
	approve func(worktree string) (bool, string)
}

func items() []item {
	return []item{
		{ID: "US-101", Prompt: "Add Neg(x int) int.", Script: `
cat > neg.go <<'GO'
package calc

// Neg returns -x.
func Neg(x int) int { return -x }
GO
git add neg.go && git commit -qm "US-101: Neg"
echo "added Neg"
`},
		{ID: "US-102", Prompt: "Add Max(a, b int) int.", Review: true, Script: `
if printf '%s\n' "$1" | grep -q 'doc comment'; then
  echo "the reviewer wants a doc comment; adding it"
  printf 'package calc\n\n// Max returns the larger of a and b.\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n' > max.go
  git commit -qam "US-102: document Max"
else
  printf 'package calc\n\nfunc Max(a, b int) int {\n\tif a > b {\n\t\treturn a\n\t}\n\treturn b\n}\n' > max.go
  git add max.go && git commit -qm "US-102: Max"
  echo "added Max"
fi
`, approve: func(wt string) (bool, string) {
			b, err := os.ReadFile(filepath.Join(wt, "max.go"))
			if err == nil && strings.Contains(string(b), "// Max returns") {
				return true, "looks good"
			}
			return false, "Max needs a doc comment"
		}},
		{ID: "US-103", Prompt: "Add Min(a, b int) int.", Script: `
echo "thinking about Min..."
sleep 60 # heartbeats continue (the runtime sends them), but nothing is ever committed
`},
		{ID: "US-104", Prompt: "Add Clamp(x, lo, hi int) int.", Review: true, Script: `
printf 'package calc\n\n// Clamp limits x to [lo, hi] (attempt %s).\nfunc Clamp(x, lo, hi int) int { return min(max(x, lo), hi) }\n' "$FOREMAN_ITERATION" > clamp.go
git add clamp.go && git commit -qm "US-104: Clamp (attempt $FOREMAN_ITERATION)"
echo "added Clamp"
`, approve: func(string) (bool, string) {
			return false, "Clamp should panic when lo > hi"
		}},
	}
}

// outcome is what a run produced, for tests.
type outcome struct {
	Repo        string
	Completed   map[foreman.ItemID]int // item → attempt that completed it
	Parked      map[foreman.ItemID]bool
	Escalations []worker.Escalation
	Stats       worker.Stats
}

func run(ctx context.Context, o options, out io.Writer) (res outcome, err error) {
	if o.progress <= 0 {
		o.progress = 2 * time.Second
	}
	if o.timeout <= 0 {
		o.timeout = 2 * time.Minute
	}
	ctx, cancel := context.WithTimeout(ctx, o.timeout)
	defer cancel()
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "%5.1fs  %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}
	dir, err := os.MkdirTemp(o.dir, "foreman-dispatcher-")
	if err != nil {
		return res, err
	}
	defer func() {
		if !o.keep {
			os.RemoveAll(dir)
		}
	}()
	res.Repo = filepath.Join(dir, "repo")
	if err := newRepo(ctx, res.Repo); err != nil {
		return res, err
	}
	mgr, err := merge.New(ctx, merge.Config{Repo: res.Repo, GitEnv: isolatedGit()})
	if err != nil {
		return res, err
	}
	defer removeWorktrees(mgr, &err)

	work := items()
	byID := map[foreman.ItemID]item{}
	for _, it := range work {
		byID[it.ID] = it
		body := "#!/bin/sh\n# scripted agent for " + string(it.ID) + "; the prompt is $1\nset -eu\n" + it.Script
		if err := os.WriteFile(filepath.Join(dir, string(it.ID)+".sh"), []byte(body), 0o755); err != nil {
			return res, err
		}
	}
	// One agent for every worker: the item is the worktree's name.
	agent := worker.AgentFunc(func(ctx context.Context, req phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		id := filepath.Base(req.WorkspacePath)
		d := agentcmd.New(agentcmd.Config{
			Argv: []string{filepath.Join(dir, id+".sh"), "{prompt}"}, Env: gitEnv(), KillGrace: time.Second,
		})
		return d.Execute(ctx, req, on)
	})

	var mu sync.Mutex
	res.Completed, res.Parked = map[foreman.ItemID]int{}, map[foreman.ItemID]bool{}
	finished := make(chan foreman.ItemID, 4*len(work))
	reviews := make(chan worker.Event, 4*len(work))
	d, err := worker.New(worker.Config{
		Agent: agent, MaxWorkers: 3,
		HeartbeatInterval: o.progress / 20, LivenessTimeout: o.progress, ProgressTimeout: o.progress,
		MaxReviewRejections: 1, // the second rejection escalates
		Escalator: worker.EscalatorFunc(func(_ context.Context, e worker.Escalation) error {
			mu.Lock()
			res.Escalations = append(res.Escalations, e)
			mu.Unlock()
			say("ESCALATION %s %s (worker %s, attempt %d): %s", e.Kind, e.Item, e.Worker, e.Attempt, e.Reason)
			return nil
		}),
		OnEvent: func(e worker.Event) {
			switch e.Kind {
			case worker.EventAssigned:
				say("%s assigned to %s (%s, attempt %d)", e.Item, e.Worker, e.Assignment, e.Attempt)
			case worker.EventReviewRequested:
				say("%s ready for review", e.Item)
				reviews <- e
			case worker.EventReviewRejected, worker.EventReviewApproved, worker.EventWorkerStalled, worker.EventRequeued:
				if e.Reason == "" {
					say("%s %s", e.Item, e.Kind)
				} else {
					say("%s %s: %s", e.Item, e.Kind, e.Reason)
				}
			case worker.EventCompleted:
				mu.Lock()
				res.Completed[e.Item] = e.Attempt
				mu.Unlock()
				say("%s completed on attempt %d", e.Item, e.Attempt)
				finished <- e.Item
			case worker.EventParked:
				mu.Lock()
				res.Parked[e.Item] = true
				mu.Unlock()
				say("%s parked", e.Item)
				finished <- e.Item
			}
		},
	})
	if err != nil {
		return res, err
	}
	defer d.Close()

	// The reviewer: a goroutine of ours, so that Review is never called
	// from inside the event hook.
	reviewCtx, stopReviewer := context.WithCancel(ctx)
	var reviewer sync.WaitGroup
	reviewer.Add(1)
	go func() {
		defer reviewer.Done()
		for {
			select {
			case <-reviewCtx.Done():
				return
			case e := <-reviews:
				wt, _ := mgr.Path(e.Item)
				ok, feedback := byID[e.Item].approve(wt)
				if _, err := d.Review(reviewCtx, worker.Verdict{Worker: e.Worker, Assignment: e.Assignment, Approved: ok, Feedback: feedback}); err != nil {
					say("review of %s: %v", e.Item, err)
				}
			}
		}
	}()
	defer func() { stopReviewer(); reviewer.Wait() }()

	fmt.Fprintf(out, "Dispatcher: %d items, 3 pooled workers, heartbeat %s, liveness %s, progress timeout %s, 1 review rejection retried\n\n",
		len(work), o.progress/20, o.progress, o.progress)
	for _, it := range work {
		wt, err := mgr.Create(ctx, it.ID)
		if err != nil {
			return res, err
		}
		if err := d.Submit(ctx, worker.Item{ID: it.ID, Prompt: it.Prompt, Worktree: wt.Path, RequireReview: it.Review}); err != nil {
			return res, err
		}
	}
	for left := len(work); left > 0; left-- {
		select {
		case <-finished:
		case <-ctx.Done():
			return res, fmt.Errorf("waiting for the items: %w", ctx.Err())
		}
	}
	if err := d.Shutdown(ctx); err != nil {
		return res, err
	}
	res.Stats = d.Stats()
	summary(out, res, time.Since(start))
	return res, nil
}

func summary(out io.Writer, res outcome, wall time.Duration) {
	fmt.Fprintf(out, "\nEscalations (a person must act):\n")
	for _, e := range res.Escalations {
		fmt.Fprintf(out, "  %-12s %s  worker %s, %s, attempt %d", e.Kind, e.Item, e.Worker, e.Assignment, e.Attempt)
		switch e.Kind {
		case worker.StuckWorker:
			fmt.Fprintf(out, ", stalls %d/%d", e.Stalls, e.StallBudget)
		case worker.ReviewLimit:
			fmt.Fprintf(out, ", rejections %d (max %d retried)", e.Rejections, e.MaxReviewRejections)
		}
		next := "parked"
		if e.Requeued {
			next = "requeued"
		}
		fmt.Fprintf(out, ", %s\n    reason: %s\n    suggested action: %s\n", next, e.Reason, e.SuggestedAction)
	}
	var done, parked []string
	for id, a := range res.Completed {
		done = append(done, fmt.Sprintf("%s (attempt %d)", id, a))
	}
	for id := range res.Parked {
		parked = append(parked, string(id))
	}
	sort.Strings(done)
	sort.Strings(parked)
	s := res.Stats
	fmt.Fprintf(out, "\nCompleted: %s\nParked:    %s\nStats: assigned %d, completed %d, requeued %d, parked %d, escalations %d, kills %d, stalls %d, rejections %d, heartbeats %d, stale %d\nin %s\n",
		strings.Join(done, ", "), strings.Join(parked, ", "), s.Assigned, s.Completed, s.Requeued, s.Parked,
		s.Escalations, s.Kills, s.Stalls, s.Rejections, s.Heartbeats, s.Stale, wall.Round(100*time.Millisecond))
}

func removeWorktrees(mgr *merge.Manager, errp *error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	wts, err := mgr.List(ctx)
	for _, wt := range wts {
		if rerr := mgr.Remove(ctx, wt.ID); rerr != nil && err == nil {
			err = rerr
		}
	}
	if err != nil && *errp == nil {
		*errp = err
	}
}
