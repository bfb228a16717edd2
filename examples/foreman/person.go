package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/team"
)

// showStatus prints how the plan stands. team.ReadStatus opens the
// team's database read-only and needs no agent, so it works while another
// foreman process runs the team.
func showStatus(ctx context.Context, o options, stdout, stderr io.Writer) int {
	if o.db != "" {
		return showClusterStatus(ctx, o, stdout, stderr)
	}
	st, err := team.ReadStatus(ctx, team.Config{Repo: o.repo})
	switch {
	case errors.Is(err, team.ErrNoState):
		fmt.Fprintf(stderr, "foreman: no team in %s yet (%v): run foreman -plan first\n", o.repo, err)
		return exitUsage
	case errors.Is(err, team.ErrInvalidConfig):
		fmt.Fprintf(stderr, "foreman: no team in %s: %v\n", o.repo, err)
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	running := ""
	if st.Host != nil {
		running = fmt.Sprintf("A foreman process (pid %d) is running the team.\n\n", st.Host.PID)
	} else if !st.Running && !o.json {
		running = stopped(&st)
	}
	return printStatus(o, st, running, stdout, stderr)
}

// stopped is what -status says when no process runs the team and stories
// are still marked running: the last run stopped (interrupted, killed, or
// failed) in the middle of them. Their worker and elapsed time are cleared
// from st, so that the table does not show work going on that no process
// does; the next run takes them up again.
func stopped(st *team.Status) string {
	var ids []string
	for i, s := range st.Stories {
		if s.State == team.StoryRunning {
			ids = append(ids, string(s.ID))
			st.Stories[i].Worker, st.Stories[i].Since = "", time.Time{}
		}
	}
	if len(ids) == 0 {
		return ""
	}
	return fmt.Sprintf("No foreman process is running the team: the last run stopped while %s %s in flight\n"+
		"(shown running below); run foreman again to go on with %s.\n\n",
		strings.Join(ids, ", "), plural(len(ids), "was", "were"), plural(len(ids), "it", "them"))
}

// plural is one when n is 1, else many.
func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// printStatus prints st as text (after the line saying who runs the team)
// or JSON, and returns -status's exit status.
func printStatus(o options, st team.Status, running string, stdout, stderr io.Writer) int {
	if o.json {
		data, err := st.JSON()
		if err != nil {
			fmt.Fprintln(stderr, "foreman:", err)
			return exitFault
		}
		fmt.Fprintf(stdout, "%s\n", data)
	} else {
		fmt.Fprint(stdout, running)
		fmt.Fprint(stdout, st.Text())
	}
	return statusExit(st)
}

// statusExit gives -status the exit status a run ending now would have.
func statusExit(st team.Status) int {
	done := 0
	for _, s := range st.Stories {
		if s.State == team.StoryMerged || s.State == team.StorySkipped {
			done++
		}
	}
	if done == len(st.Stories) {
		return exitMerged
	}
	return exitNeedsPerson
}

// resolve records a person's decision about a paused story. The next run
// acts on it (a run in progress does when it next looks at its plan).
func resolve(ctx context.Context, o options, stdout, stderr io.Writer) int {
	id, action, ok := strings.Cut(o.resolve, "=")
	if !ok || id == "" {
		fmt.Fprintf(stderr, "foreman: -resolve %q: want ID=ACTION, ACTION one of %s\n", o.resolve, actionNames())
		return exitUsage
	}
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	if _, err := os.Stat(filepath.Join(repo, team.StateDirName, "foreman.db")); err != nil {
		fmt.Fprintf(stderr, "foreman: no team in %s yet: nothing to resolve\n", repo)
		return exitUsage
	}
	// A person's decision is recorded while no run coordinates the team,
	// so that the run that acts on it is the next one.
	if st, err := team.ReadStatus(ctx, team.Config{Repo: repo}); err == nil && st.Running {
		fmt.Fprintf(stderr, "foreman: %v (pid %d)\n", team.ErrBusy, st.Host.PID)
		fmt.Fprintln(stderr, "foreman: stop the run (Ctrl-C), resolve, then run the same command again")
		return exitFault
	}
	tm, err := team.New(ctx, personConfig(repo))
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	defer tm.Close()
	err = tm.Resolve(ctx, foreman.ItemID(id), team.Action(action), o.note)
	switch {
	case errors.Is(err, team.ErrUnknownAction), errors.Is(err, team.ErrUnknownStory), errors.Is(err, team.ErrNotPaused):
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	case err != nil:
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	fmt.Fprintf(stdout, "%s: %s recorded; run foreman -plan ... again to act on it\n", id, action)
	return exitMerged
}

func actionNames() string {
	var names []string
	for _, a := range team.Actions() {
		names = append(names, string(a))
	}
	return strings.Join(names, ", ")
}

// personConfig opens the team for recording a decision: no agent runs and
// no gate is checked, but New wants both.
func personConfig(repo string) team.Config {
	return team.Config{
		Repo:  repo,
		Agent: noAgent{},
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
			Checks: []phases.GateCheck{{Name: "unused", Argv: []string{"false"}}}}}},
	}
}

// noAgent stands in for the agent when the team is opened only to read or
// resolve; it never runs.
type noAgent struct{}

func (noAgent) Execute(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
	return phases.AgentResult{}, errors.New("foreman: no agent in -status or -resolve")
}
