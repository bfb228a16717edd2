package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/agentforeman/foreman"
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

// watch prints the team's events as they come, each story's new state
// when an event changes it, and the plan's counts after each change to a
// story as a whole, until it has printed the event whose sequence number
// arrives on last (the last one Run recorded). It reads what changed
// (Team.StatusOf, Team.Summary: a story, a few counts), never the whole
// status, so that a plan of thousands of stories costs the watcher what
// happens in it.
func watch(ctx context.Context, tm *team.Team, events <-chan team.Event, last <-chan uint64, out *printer) {
	var seen, target uint64
	haveTarget := false
	states := map[foreman.ItemID]team.StoryState{}
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
			if e.Story != "" {
				if st, err := tm.StatusOf(ctx, e.Story); err == nil && states[e.Story] != st.State {
					if _, known := states[e.Story]; known || st.State != team.StoryPending {
						out.printf("          %-10s is %s%s\n", e.Story, st.State, storyNote(st))
					}
					states[e.Story] = st.State
				}
			}
			switch e.Kind {
			case team.EventStoryMerged, team.EventStoryPaused, team.EventStoryResolved, team.EventRunStarted:
				if sum, err := tm.Summary(ctx); err == nil {
					out.printf("          stories: %s\n", countsLine(sum))
				}
			}
		case n := <-last:
			target, haveTarget, last = n, true, nil
		}
	}
}

// storyNote says what a story's new state is about.
func storyNote(st team.StoryStatus) string {
	switch {
	case st.State == team.StoryMerged && st.Commit != "":
		return " (" + short(st.Commit) + ")"
	case st.State == team.StoryRunning && st.Role != "":
		return fmt.Sprintf(" (stage %d, %s)", st.Stage, st.Role)
	case st.State == team.StoryPaused && st.Pause != nil:
		return fmt.Sprintf(" (%s)", st.Pause.Reason)
	}
	return ""
}

// countsLine is the plan's counts: "2 merged, 1 running, 3 pending of 6".
func countsLine(sum team.Summary) string {
	var parts []string
	for _, s := range []team.StoryState{team.StoryMerged, team.StoryRunning, team.StoryPending, team.StoryPaused,
		team.StoryBlocked, team.StorySkipped, team.StoryAbandoned} {
		if n := sum.ByState[s]; n > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n, s))
		}
	}
	return fmt.Sprintf("%s of %d", strings.Join(parts, ", "), sum.Stories)
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
