package main

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
	"github.com/agentforeman/foreman/pipeline/team"
)

// printer serializes the run's output and stamps event lines with the time
// since the start.
type printer struct {
	mu    sync.Mutex
	w     io.Writer
	start time.Time
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

func (p *printer) line(id foreman.ItemID, what string) {
	p.printf("%5.1fs  %-7s %s\n", time.Since(p.start).Seconds(), id, what)
}

func (p *printer) plan(repo string, plan []team.Story, o options) {
	p.printf("Foreman quickstart: %d stories on a throwaway Go module, %d in flight at once\nrepository %s\n\n", len(plan), o.parallel, repo)
	for _, s := range plan {
		after := ""
		if len(s.After) > 0 {
			after = fmt.Sprintf("  (after %s)", strings.ReplaceAll(strings.Trim(fmt.Sprint(s.After), "[]"), " ", ", "))
		}
		p.printf("  %s  %s%s\n", s.ID, s.Title, after)
	}
	if o.real != "" {
		p.printf("\nThe agents are the real %s CLI; its model is a script this program serves (modeltest), so its\n"+
			"answers are fixed but its tools, sessions and permission rules are the real ones.\n", o.real)
	}
	if o.agent == "" && o.format == "" {
		p.printf("\nScripted agent: US-003's first build has a bug the gates catch; US-002 changes the line of\ncalc.go that US-001 changes, and lands second: the team rebases it, the rebase conflicts, and\nits agent, given the conflict once, keeps its own line.\n")
		if o.parallel < 2 {
			p.printf("With -parallel 1, US-002 starts after US-001 has landed, so there is no conflict to show.\n")
		}
	}
	p.printf("\n")
}

// watch prints the team's events as they happen, and its status whenever
// a story merges or pauses, until the run finishes; it returns the events.
func (p *printer) watch(ctx context.Context, tm *team.Team) []team.Event {
	var seen []team.Event
	for e := range tm.Subscribe(ctx, 0) {
		seen = append(seen, e)
		switch e.Kind {
		case team.EventStageStarted:
			p.line(e.Story, fmt.Sprintf("%-12s %s starts", e.Role, e.Worker))
		case team.EventStageFinished:
			p.line(e.Story, fmt.Sprintf("%-12s %s", e.Role, e.Line))
		case team.EventWorker: // a stalled, failed or rate-limited agent, say
			p.line(e.Story, fmt.Sprintf("%-12s worker %s: %s", e.Role, e.Worker, e.Detail))
		case team.EventConflict, team.EventRebased, team.EventConflictRework: // conflict triage
			p.line(e.Story, fmt.Sprintf("%-12s %s: %s", "merge", e.Kind, e.Detail))
		case team.EventStoryMerged, team.EventStoryPaused:
			what := "merged as " + short(e.Commit)
			if e.Kind == team.EventStoryPaused {
				what = "PAUSED: " + e.Detail
			}
			p.line(e.Story, what)
			if st, err := tm.Status(ctx); err == nil {
				st.Graph = "" // it catches up with the story a moment later: shown at the end
				p.printf("\n%s\n", st.Text())
			}
		case team.EventRunFinished:
			return seen
		}
	}
	return seen
}

// gateWatch is the run loop's feedback generator (the library's), which
// also prints the gates' failures: they happen inside a build stage, where
// the team's events do not reach.
type gateWatch struct{ p *printer }

func (g gateWatch) Generate(ctx context.Context, snap phases.Snapshot, rep phases.VerificationReport, plan phases.GatePlan, opts phases.FeedbackOptions) (string, error) {
	var failed []string
	for _, c := range rep.FailedChecks() {
		failed = append(failed, fmt.Sprintf("%s: %s", strings.Join(c.Argv, " "), firstLine(c.Output, "--- FAIL")))
	}
	// The worktree is named after the story (merge: <root>/<id>).
	g.p.line(foreman.ItemID(filepath.Base(snap.WorkspacePath)), "gates failed, the agent gets their output: "+strings.Join(failed, "; "))
	return gates.NewFeedbackGenerator(gates.FeedbackConfig{}).Generate(ctx, snap, rep, plan, opts)
}

func firstLine(out, prefix string) string {
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(strings.TrimSpace(l), prefix) {
			return strings.TrimSpace(l)
		}
	}
	return strings.TrimSpace(out)
}

// summary prints each story's stages with their outcome and duration, the
// result, and main's history.
func (p *printer) summary(ctx context.Context, tm *team.Team, res outcome, o options) {
	if st, err := tm.Status(ctx); err == nil {
		p.printf("The team at the end:\n%s\n", st.Text())
	}
	type stageRun struct {
		outcome string
		took    time.Duration
	}
	started := map[foreman.AssignmentID]time.Time{}
	runs := map[foreman.ItemID][][]stageRun{}
	for _, e := range res.Events {
		switch e.Kind {
		case team.EventStageStarted:
			started[e.Assignment] = e.At
		case team.EventStageFinished:
			r := runs[e.Story]
			for len(r) <= e.Stage {
				r = append(r, nil)
			}
			r[e.Stage] = append(r[e.Stage], stageRun{string(e.Outcome), e.At.Sub(started[e.Assignment])})
			runs[e.Story] = r
		}
	}
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  STORY\tRESULT\tPLAN\tVALIDATE\tBUILD\tQUALITY GATE\t")
	for _, s := range res.Result.Stories {
		result := string(s.State)
		if s.Commit != "" {
			result += " " + short(s.Commit)
		} else if s.Pause != nil {
			result += " (" + strings.ToLower(strings.ReplaceAll(string(s.Pause.Reason), "_", " ")) + ")"
		}
		cells := []string{"-", "-", "-", "-"}
		for i, rs := range runs[s.ID] {
			var parts []string
			for _, r := range rs {
				parts = append(parts, fmt.Sprintf("%s %s", r.outcome, r.took.Round(100*time.Millisecond)))
			}
			if i < len(cells) && len(parts) > 0 {
				cells[i] = strings.Join(parts, ", ")
			}
		}
		fmt.Fprintf(tw, "  %s\t%s\t%s\t\n", s.ID, result, strings.Join(cells, "\t"))
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n%s, in %s.\n", res.Result, res.Wall.Round(100*time.Millisecond))
	if log, err := git(ctx, res.Repo, "log", "--format=%h %s  %(trailers:key=Foreman-Item,separator=%x2C )", "main"); err == nil {
		b.WriteString("\nmain (one squash commit per merged story):\n")
		for _, l := range strings.Split(strings.TrimSpace(log), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if o.keep {
		fmt.Fprintf(&b, "\nKept %s: the repository (git -C %s log --stat), the team's state in its .foreman, the agent script.\n", res.Dir, res.Repo)
	} else {
		fmt.Fprintf(&b, "\nRepository %s is deleted now; run with -keep to look at it.\n", res.Repo)
	}
	p.printf("\n%s", b.String())
}

func short(commit string) string { return commit[:min(len(commit), 7)] }
