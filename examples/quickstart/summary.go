package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/pipeline"
)

// Story outcomes.
const (
	outcomeMerged     = "merged"
	outcomePaused     = "PAUSED"
	outcomeNotStarted = "not started"
)

func outcomes(stories []*story, runs map[foreman.ItemID]storyRun, attempts []attempt, escalations []pipeline.Escalation) []storyOutcome {
	out := make([]storyOutcome, 0, len(stories))
	for _, s := range stories {
		so := storyOutcome{Story: s, Status: outcomeNotStarted}
		for _, a := range attempts {
			if a.Item == s.ID {
				so.Attempts = append(so.Attempts, a)
			}
		}
		if r, ok := runs[s.ID]; ok {
			switch {
			case r.final.Status == pipeline.StatusDone:
				so.Status, so.Commit = outcomeMerged, r.final.Commit
			case r.final.Status == pipeline.StatusPaused:
				so.Status = outcomePaused
				for i := range escalations {
					if escalations[i].Item == s.ID {
						so.Pause = &escalations[i]
					}
				}
				if so.Pause == nil {
					so.Pause = r.final.Pause
				}
			default:
				so.Status = "unfinished"
			}
			if !r.ended.IsZero() {
				so.Total = r.ended.Sub(r.started)
			}
		}
		out = append(out, so)
	}
	return out
}

var stageNames = [...]string{"PLAN", "VALIDATE", "EXECUTE", "QUALITY GATE"}

// report prints the end of the run: the escalations, the summary table,
// and main's history.
func report(ctx context.Context, log *printer, res outcome, o options, escalations []pipeline.Escalation, mgr *merge.Manager) {
	var b strings.Builder
	if len(escalations) > 0 {
		b.WriteString("Escalations (a person must act):\n")
		for _, e := range escalations {
			fmt.Fprintf(&b, "  %s at Stage %d: %s [%s]\n", e.Item, e.Stage, e.Message, e.Reason)
			if len(e.Files) > 0 {
				fmt.Fprintf(&b, "    files: %s\n", strings.Join(e.Files, ", "))
			}
			fmt.Fprintf(&b, "    suggested action: %s\n", e.SuggestedAction)
			if e.Reason == pipeline.ReasonMergeConflict {
				branch, _ := mgr.Branch(e.Item)
				fmt.Fprintf(&b, "    the demo removed its worktree; branch %s keeps the work (pipeline.Runtime.Resolve restarts it)\n", branch)
			}
		}
		b.WriteString("\n")
	}

	b.WriteString("Summary (durations per attempt; the quality gate runs go vet and go test):\n")
	tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
	fmt.Fprintf(tw, "  STORY\tOUTCOME\tATTEMPTS\t%s\tTOTAL\n", strings.Join(stageNames[:], "\t"))
	merged, paused := 0, 0
	for _, so := range res.Stories {
		outcome := so.Status
		switch so.Status {
		case outcomeMerged:
			merged++
			outcome += " " + short(so.Commit)
		case outcomePaused:
			paused++
			if so.Pause != nil {
				outcome += " " + strings.ToLower(strings.ReplaceAll(string(so.Pause.Reason), "_", " "))
			}
		}
		cells := make([]string, len(stageNames))
		for _, a := range so.Attempts {
			cell := round(a.Duration).String()
			if a.Stage == 3 || a.Verdict == "ERROR" {
				cell = a.Verdict + " " + cell
			}
			if a.Stage >= 0 && a.Stage < len(cells) {
				if cells[a.Stage] != "" {
					cells[a.Stage] += ", "
				}
				cells[a.Stage] += cell
			}
		}
		for i := range cells {
			if cells[i] == "" {
				cells[i] = "-"
			}
		}
		total := "-"
		if so.Total > 0 {
			total = round(so.Total).String()
		}
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%s\t%s\n", so.Story.ID, outcome, len(so.Attempts), strings.Join(cells, "\t"), total)
	}
	tw.Flush()
	fmt.Fprintf(&b, "\n%d merged, %d paused, %d not started, in %s.\n", merged, paused, len(res.Stories)-merged-paused, round(res.Wall))

	if logText, err := gitLog(ctx, res.Repo); err == nil {
		fmt.Fprintf(&b, "\nmain (one squash commit per merged story):\n")
		for _, l := range strings.Split(strings.TrimSpace(logText), "\n") {
			fmt.Fprintf(&b, "  %s\n", l)
		}
	}
	if o.keep {
		fmt.Fprintf(&b, "\nKept:\n  repository  %s  (git -C %s log --stat)\n", res.Repo, res.Repo)
		for _, r := range res.Reports {
			fmt.Fprintf(&b, "  run report  %s\n", r)
		}
		fmt.Fprintf(&b, "  board       %s\n  agents      %s\n  leases      %s\n", filepath.Join(res.Dir, "board"), filepath.Join(res.Dir, "agents"), filepath.Join(res.Dir, "leases"))
	} else {
		fmt.Fprintf(&b, "\nRepository %s is deleted now; run with -keep to look at it.\n", res.Repo)
	}
	log.block(b.String())
}
