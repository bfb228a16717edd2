package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/agentforeman/foreman/pipeline/team"
)

// printer serializes the command's output.
type printer struct {
	mu sync.Mutex
	w  io.Writer
}

func (p *printer) printf(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	fmt.Fprintf(p.w, format, args...)
}

func (p *printer) block(text string) {
	p.printf("\n%s\n", strings.TrimRight(text, "\n"))
}

// watch prints the team's events as they come and the status table after
// each change to a story as a whole, until it has printed the event whose
// sequence number arrives on last (the last one Run recorded).
func watch(ctx context.Context, tm *team.Team, events <-chan team.Event, last <-chan uint64, out *printer) {
	var seen, target uint64
	haveTarget := false
	for !haveTarget || seen < target {
		select {
		case e, ok := <-events:
			if !ok {
				return
			}
			seen = e.Seq
			if line := eventLine(e); line != "" {
				out.printf("%s\n", line)
			}
			switch e.Kind {
			case team.EventStoryMerged, team.EventStoryPaused, team.EventStoryResolved, team.EventRunStarted:
				if st, err := tm.Status(ctx); err == nil {
					st.Graph = "" // the table says it; -status shows the graph
					out.block(st.Text())
					out.printf("\n")
				}
			}
		case n := <-last:
			target, haveTarget, last = n, true, nil
		}
	}
}

// eventLine is one event as a line of the run's log.
func eventLine(e team.Event) string {
	at := e.At.Format("15:04:05")
	stage := fmt.Sprintf("stage %d", e.Stage)
	if e.Role != "" {
		stage += " (" + e.Role + ")"
	}
	switch e.Kind {
	case team.EventRunStarted:
		return at + "  run started"
	case team.EventRunFinished:
		return at + "  run finished: " + e.Detail
	case team.EventStoryAdded:
		return fmt.Sprintf("%s  %-10s added: %s", at, e.Story, e.Detail)
	case team.EventStageStarted:
		return fmt.Sprintf("%s  %-10s %s started, worker %s", at, e.Story, stage, e.Worker)
	case team.EventStageFinished:
		line := fmt.Sprintf("%s  %-10s %s: %s", at, e.Story, stage, e.Outcome)
		if e.Detail != "" {
			line += ": " + oneLine(e.Detail, 200)
		}
		return line
	case team.EventStoryMerged:
		return fmt.Sprintf("%s  %-10s merged as %s", at, e.Story, short(e.Commit))
	case team.EventStoryPaused:
		return fmt.Sprintf("%s  %-10s PAUSED at %s: %s\n          resolve with -resolve %s=retry|resume|skip|abandon",
			at, e.Story, stage, oneLine(e.Detail, 300), e.Story)
	case team.EventWorker:
		return fmt.Sprintf("%s  %-10s %s, worker %s: %s", at, e.Story, stage, e.Worker, oneLine(e.Detail, 300))
	case team.EventGates:
		line := fmt.Sprintf("%s  %-10s %s gates: %s", at, e.Story, stage, e.Outcome)
		if e.Detail != "" {
			line += ": " + oneLine(e.Detail, 300)
		}
		return line
	case team.EventUsage:
		return fmt.Sprintf("%s  %-10s %s spent %d tokens ($%.4f)", at, e.Story, stage, e.Tokens, e.CostUSD)
	case team.EventConflict:
		return fmt.Sprintf("%s  %-10s merge conflict (%s) in %s", at, e.Story, strings.ToLower(string(e.Outcome)), strings.Join(e.Files, ", "))
	case team.EventRebased:
		return fmt.Sprintf("%s  %-10s rebased onto the target cleanly; gates run again", at, e.Story)
	case team.EventConflictRework:
		return fmt.Sprintf("%s  %-10s back to its builder with the conflict in %s", at, e.Story, strings.Join(e.Files, ", "))
	case team.EventStoryResolved:
		line := fmt.Sprintf("%s  %-10s resolved: %s", at, e.Story, e.Action)
		if e.Detail != "" {
			line += " (" + oneLine(e.Detail, 200) + ")"
		}
		return line
	}
	return fmt.Sprintf("%s  %-10s %s %s", at, e.Story, e.Kind, e.Detail)
}

func oneLine(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > n {
		return s[:n-1] + "…"
	}
	return s
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}
