package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline/sqlitestore"
	"github.com/agentforeman/foreman/pipeline/team"
)

// showStatus prints how the plan stands. It opens the team's database
// read-only, so it works while another foreman process runs the team.
func showStatus(ctx context.Context, o options, stdout, stderr io.Writer) int {
	repo, err := filepath.Abs(o.repo)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitUsage
	}
	dbPath := filepath.Join(repo, team.StateDirName, "foreman.db")
	if _, err := os.Stat(dbPath); err != nil {
		fmt.Fprintf(stderr, "foreman: no team in %s yet (no %s): run foreman -plan first\n", repo, dbPath)
		return exitUsage
	}
	db, err := sqlitestore.Open(ctx, dbPath, sqlitestore.Options{ReadOnly: true, SkipQuickCheck: true})
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	defer db.Close()
	tm, err := team.New(ctx, personConfig(repo, db))
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	defer tm.Close()
	st, err := tm.Status(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		return exitFault
	}
	running, pid := runningPid(repo)
	st.Running = running // Status knows only about a Run of its own Team value
	st.Graph = withoutCommands(st.Graph)
	if o.json {
		data, err := st.JSON()
		if err != nil {
			fmt.Fprintln(stderr, "foreman:", err)
			return exitFault
		}
		fmt.Fprintf(stdout, "%s\n", data)
	} else {
		if running {
			fmt.Fprintf(stdout, "A foreman process (pid %s) is running the team.\n\n", pid)
		}
		fmt.Fprint(stdout, st.Text())
	}
	return statusExit(st)
}

// withoutCommands drops the graph report's line of commands, which are the
// task graph's coordinator's ('resume', 'check'), not foreman's.
func withoutCommands(graph string) string {
	lines := strings.SplitAfter(graph, "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, "] Commands: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
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
	// Only one process changes the team's state at a time: the decision of
	// a person is recorded while no run holds the repository.
	lock, err := acquireRun(repo)
	if err != nil {
		fmt.Fprintln(stderr, "foreman:", err)
		if errors.Is(err, errBusy) {
			fmt.Fprintln(stderr, "foreman: stop the run (Ctrl-C), resolve, then run the same command again")
		}
		return exitFault
	}
	defer lock.release()
	tm, err := team.New(ctx, personConfig(repo, nil))
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

// personConfig opens the team for reading its status or recording a
// decision: no agent runs and no gate is checked, but New wants both.
func personConfig(repo string, db *sqlitestore.Store) team.Config {
	cfg := team.Config{
		Repo:  repo,
		Agent: noAgent{},
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests,
			Checks: []phases.GateCheck{{Name: "unused", Argv: []string{"false"}}}}}},
	}
	if db != nil {
		cfg.Store = db
	}
	return cfg
}

// noAgent stands in for the agent when the team is opened only to read or
// resolve; it never runs.
type noAgent struct{}

func (noAgent) Execute(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
	return phases.AgentResult{}, errors.New("foreman: no agent in -status or -resolve")
}
