package team

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
)

// StoryState is where a story stands as a whole.
type StoryState string

const (
	// StoryPending: not started (waiting for a worker slot, or for the
	// stories it comes after to merge).
	StoryPending StoryState = "pending"
	// StoryRunning: a stage is being worked on, or the story is merging.
	StoryRunning StoryState = "running"
	// StoryMerged: done, its squash commit is on the target branch.
	StoryMerged StoryState = "merged"
	// StoryPaused: waiting for a person (Resolve).
	StoryPaused StoryState = "paused"
	// StorySkipped and StoryAbandoned: a person resolved it so.
	StorySkipped   StoryState = "skipped"
	StoryAbandoned StoryState = "abandoned"
	// StoryBlocked: comes after a story that is paused or abandoned.
	StoryBlocked StoryState = "blocked"
)

// StoryStatus is one story's status.
type StoryStatus struct {
	ID    foreman.ItemID   `json:"id"`
	Title string           `json:"title"`
	After []foreman.ItemID `json:"after,omitempty"`
	State StoryState       `json:"state"`
	// Stage and Role are the current stage (the last one, once finished).
	Stage int    `json:"stage"`
	Role  string `json:"role,omitempty"`
	// Worker, Assignment and Since describe the stage's current worker.
	Worker     foreman.WorkerID     `json:"worker,omitempty"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	Since      time.Time            `json:"since,omitzero"`
	// Attempts counts the workers the story has had.
	Attempts int `json:"attempts"`
	// Last is the last stage result; Feedback what the next worker is told.
	Last     string `json:"last,omitempty"`
	Feedback string `json:"feedback,omitempty"`
	Commit   string `json:"commit,omitempty"`
	// Pause is the escalation of a paused story: its cause and what to do.
	// WorkerCause is what the worker pool last said went wrong with its
	// worker (why a worker "crashed").
	Pause       *pipeline.Escalation `json:"pause,omitempty"`
	WorkerCause string               `json:"workerCause,omitempty"`
	// BlockedBy lists, for a blocked story, the stories holding it back.
	BlockedBy []foreman.ItemID `json:"blockedBy,omitempty"`
	// Decision is a person's recorded decision, if any.
	Decision Action    `json:"decision,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Updated  time.Time `json:"updated,omitzero"`
	// Tokens and CostUSD are what the story's agents have spent, over
	// every stage, attempt and run, as their CLIs reported it (agentcmd
	// reads Claude's and Codex's usage; an agent that reports none counts
	// zero).
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUSD"`
	// Triage is what conflict triage did about the story's merge
	// conflicts, for a paused or running story that had one.
	Triage *ConflictTriage `json:"triage,omitempty"`
	// Retrying, for a running story, says that its agent's CLI is
	// waiting to retry its model API (rate-limited, overloaded) and since
	// when; nil otherwise, and always from ReadStatus (it is this
	// process's view of the agents it runs).
	Retrying *ProviderRetry `json:"retrying,omitempty"`
	// Refused counts what the story's agents tried beyond their own
	// assignments and the team refused (EventRefused: a report for
	// another assignment, a token used after its stage, a forged printed
	// line, ...), over every run; RefusedLast says what the last was.
	// RefusedKinds are what they were: the last 8 kinds of attempt seen
	// (a kind's details differ only in the names, paths and numbers they
	// hold), in the order first seen, each with its count and when it was
	// first and last refused; a flood of one kind pushes out no other.
	// The kinds' counts add up to Refused unless older kinds were pushed
	// out by later ones (or were counted before kinds were kept).
	Refused      int64         `json:"refused,omitempty"`
	RefusedLast  string        `json:"refusedLast,omitempty"`
	RefusedKinds []RefusalKind `json:"refusedKinds,omitempty"`
}

// Status is the team as a person watching it sees it.
type Status struct {
	At time.Time `json:"at"`
	// Running: a Run is in progress (ReadStatus: in any process; Host
	// says which). Workers is the running team's (else the Config's; 0
	// from ReadStatus when no run holds the team and Config.Workers was
	// not set: not known).
	Running bool          `json:"running"`
	Host    *RunHost      `json:"host,omitempty"`
	Workers int           `json:"workers"`
	Stories []StoryStatus `json:"stories"`
	// Escalations are the paused stories' escalations, waiting for a
	// person, with the actions Resolve offers.
	Escalations []pipeline.Escalation `json:"escalations"`
	Actions     []Action              `json:"actions"`
	// Graph is the dependency graph's status report, as text.
	Graph string `json:"graph"`
	// Tokens and CostUSD are what every story's agents have spent.
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUSD"`
	// Refused counts every story's refused attempts (StoryStatus.Refused).
	Refused int64 `json:"refused,omitempty"`
	// Containment says how the team's agents run, and with the default
	// Verifier its gates and merge check: "bwrap" (each in an OS
	// sandbox) or "none: " and why, for agentcmd drivers (agentcmd's
	// Driver.Containment; distinct answers of several drivers joined by
	// "; "); empty for other drivers. From ReadStatus it is what the
	// team's last Run recorded as it started (empty before any Run).
	Containment string `json:"containment,omitempty"`
}

// RunHost is the process running a team, as ReadStatus finds it.
type RunHost struct {
	PID     int       `json:"pid"`
	Host    string    `json:"host,omitempty"`
	Started time.Time `json:"started"`
}

// Result is how a Run left the plan.
type Result struct {
	Stories []StoryStatus `json:"stories"`
	// Counts by state.
	Merged, Paused, Skipped, Abandoned, Blocked, Pending, Running int
}

func (r Result) summary() string {
	s := fmt.Sprintf("%d merged, %d paused, %d skipped, %d abandoned, %d blocked, %d pending", r.Merged, r.Paused,
		r.Skipped, r.Abandoned, r.Blocked, r.Pending)
	if r.Running > 0 {
		s += fmt.Sprintf(", %d running", r.Running)
	}
	return s
}

// String says how many stories ended how.
func (r Result) String() string { return r.summary() }

// storyState is a story's state from its task and its pipeline state.
func storyState(task taskgraph.Task, st pipeline.State, d *decision) StoryState {
	switch {
	case st.Status == pipeline.StatusDone:
		return StoryMerged
	case d != nil && d.Action == Skip:
		return StorySkipped
	case d != nil && d.Action == Abandon:
		return StoryAbandoned
	case st.Status == pipeline.StatusPaused && (d == nil || !d.restarts()):
		return StoryPaused
	case st.Status == pipeline.StatusActive || task.Status == taskgraph.InProgress:
		return StoryRunning
	}
	return StoryPending
}

// Status reports every story, the escalations waiting for a person and
// the dependency graph. It works whether or not the team runs, and costs
// the stories it reports: the team keeps every story's status as the
// records it is made of are written (see StatusOf and Summary for one
// story and for the counts), and reads it again from the store only when
// another process wrote there (a person's Resolve from another terminal).
// Graph is the dependency graph's report for a plan of up to 200 stories
// and a summary for a larger one.
func (t *Team) Status(ctx context.Context) (Status, error) {
	now := t.clk.Now()
	t.mu.Lock()
	running := t.run != nil
	t.mu.Unlock()
	if err := t.view.fresh(ctx); err != nil {
		return Status{}, err
	}
	stories := t.view.statuses(&t.retries)
	graph, err := t.graphFor(ctx, stories)
	if err != nil {
		return Status{}, err
	}
	s := statusOf(now, running, t.cfg.Workers, stories, graph)
	s.Containment = t.containment()
	return s, nil
}

// statusOf assembles a Status.
func statusOf(now time.Time, running bool, workers int, stories []StoryStatus, graph string) Status {
	s := Status{At: now, Running: running, Workers: workers, Stories: stories, Actions: Actions(), Graph: graph}
	for _, st := range stories {
		if st.State == StoryPaused && st.Pause != nil {
			s.Escalations = append(s.Escalations, *st.Pause)
		}
		s.Tokens += st.Tokens
		s.CostUSD += st.CostUSD
		s.Refused += st.Refused
	}
	return s
}

// StatusOf reports one story, as Status would: what a page showing one
// story or an action about it reads, at the cost of that story. The
// error matches ErrUnknownStory for a story not in the plan.
func (t *Team) StatusOf(ctx context.Context, story foreman.ItemID) (StoryStatus, error) {
	if err := t.view.fresh(ctx); err != nil {
		return StoryStatus{}, err
	}
	s, ok := t.view.one(story, &t.retries)
	if !ok {
		return StoryStatus{}, fmt.Errorf("%w: %s", ErrUnknownStory, story)
	}
	return s, nil
}

// containment is what the agentcmd drivers of the stages and the reviewer
// say of their sandbox, each distinct answer once.
func (t *Team) containment() string {
	var says []string
	agents := []phases.AgentDriver{t.cfg.Reviewer}
	for _, st := range t.cfg.Stages {
		agents = append(agents, st.Agent)
	}
	for _, a := range agents {
		if d, ok := a.(interface{ Containment() string }); ok {
			if c := d.Containment(); !slices.Contains(says, c) {
				says = append(says, c)
			}
		}
	}
	return strings.Join(says, "; ")
}

// Summary is the team's status in counts: what a metrics scrape or the
// header of a dashboard needs, at the cost of a few numbers whatever the
// size of the plan.
type Summary struct {
	At time.Time `json:"at"`
	// Running: a Run of this Team is in progress (in this process).
	Running bool `json:"running"`
	Workers int  `json:"workers"`
	// Stories counts the plan's stories, ByState them by state (a state
	// no story is in is left out).
	Stories int                `json:"stories"`
	ByState map[StoryState]int `json:"byState"`
	// Tokens and CostUSD are what every story's agents have spent.
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUSD"`
	// Refused counts every story's refused attempts (Status.Refused).
	Refused int64 `json:"refused,omitempty"`
}

// Summary reports the team's status in counts (see Summary).
func (t *Team) Summary(ctx context.Context) (Summary, error) {
	now := t.clk.Now()
	t.mu.Lock()
	running := t.run != nil
	t.mu.Unlock()
	if err := t.view.fresh(ctx); err != nil {
		return Summary{}, err
	}
	v := t.view.summary()
	return Summary{At: now, Running: running, Workers: t.cfg.Workers, Stories: v.Stories, ByState: v.ByState,
		Tokens: v.Tokens, CostUSD: v.CostUSD, Refused: v.Refused}, nil
}

// result reads how the plan stands.
func (t *Team) result(ctx context.Context) (Result, error) {
	if err := t.view.fresh(ctx); err != nil {
		return Result{}, err
	}
	stories := t.view.statuses(&t.retries)
	r := Result{Stories: stories}
	for _, s := range stories {
		switch s.State {
		case StoryMerged:
			r.Merged++
		case StoryPaused:
			r.Paused++
		case StorySkipped:
			r.Skipped++
		case StoryAbandoned:
			r.Abandoned++
		case StoryBlocked:
			r.Blocked++
		case StoryRunning:
			r.Running++
		default:
			r.Pending++
		}
	}
	return r, nil
}

// Text renders the status for a terminal: a table of stories, the
// escalations with what to do, and the dependency graph.
func (s Status) Text() string {
	var b strings.Builder
	var about []string
	if s.Workers > 0 {
		about = append(about, fmt.Sprintf("%d workers", s.Workers))
	}
	switch {
	case s.Host != nil:
		about = append(about, fmt.Sprintf("running in pid %d on %s since %s", s.Host.PID, s.Host.Host, s.Host.Started.Format(time.TimeOnly)))
	case s.Running:
		about = append(about, "running")
	}
	b.WriteString("Stories")
	if len(about) > 0 {
		b.WriteString(" (" + strings.Join(about, ", ") + ")")
	}
	b.WriteString("\n")
	if s.Containment != "" {
		b.WriteString("Agents' containment: " + s.Containment + "\n")
	}
	// The spending columns appear once an agent reported any, so that a
	// team of agents that report none is not shown a column of zeros.
	spent := s.Tokens != 0 || s.CostUSD != 0
	tw := tabwriter.NewWriter(&b, 0, 4, 2, ' ', 0)
	if spent {
		fmt.Fprintln(tw, "  ID\tSTATE\tSTAGE\tWORKER\tELAPSED\tTOKENS\tCOST\tLAST\t")
	} else {
		fmt.Fprintln(tw, "  ID\tSTATE\tSTAGE\tWORKER\tELAPSED\tLAST\t")
	}
	for _, st := range s.Stories {
		stage, worker, elapsed := "", "", ""
		if st.Role != "" {
			stage = fmt.Sprintf("%d %s", st.Stage, st.Role)
		}
		if st.State == StoryRunning {
			worker = string(st.Worker)
			if !st.Since.IsZero() {
				elapsed = s.At.Sub(st.Since).Round(time.Second).String()
			}
		}
		last := st.Last
		switch {
		case st.State == StoryMerged && st.Commit != "":
			last = "merged as " + short(st.Commit)
		case st.State == StoryBlocked:
			last = "after " + joinIDs(st.BlockedBy)
		case st.State == StoryPaused && st.Pause != nil:
			last = string(st.Pause.Reason) + ": " + st.Pause.Message
		case st.Retrying != nil:
			last = fmt.Sprintf("waiting for the model API since %s (%s)", st.Retrying.Since.Format(time.TimeOnly), st.Retrying.Detail)
		}
		if spent {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t\n", st.ID, st.State, stage, worker, elapsed, st.Tokens,
				dollars(st.CostUSD), clip(last, 60))
		} else {
			fmt.Fprintf(tw, "  %s\t%s\t%s\t%s\t%s\t%s\t\n", st.ID, st.State, stage, worker, elapsed, clip(last, 60))
		}
	}
	tw.Flush()
	if spent {
		fmt.Fprintf(&b, "  spent in all: %d tokens, %s\n", s.Tokens, dollars(s.CostUSD))
	}
	writeRefused(&b, s)
	if len(s.Escalations) > 0 {
		fmt.Fprintf(&b, "\nWaiting for a person (Resolve: %s)\n", joinActions(s.Actions))
		for _, e := range s.Escalations {
			fmt.Fprintf(&b, "  %s at stage %d: %s\n", e.Item, e.Stage, e.Message)
			if e.SuggestedAction != "" {
				fmt.Fprintf(&b, "    what to do: %s\n", e.SuggestedAction)
			}
			if c := causeOf(s.Stories, e.Item); c != "" && e.Reason == pipeline.ReasonCrashed {
				fmt.Fprintf(&b, "    cause: %s\n", c)
			}
			if len(e.Files) > 0 {
				fmt.Fprintf(&b, "    files: %s\n", strings.Join(e.Files, ", "))
			}
			if tr := triageOf(s.Stories, e.Item); tr != nil {
				fmt.Fprintf(&b, "    triage: %s\n", tr)
			}
		}
	}
	if s.Graph != "" {
		b.WriteString("\n" + s.Graph)
		if !strings.HasSuffix(s.Graph, "\n") {
			b.WriteString("\n")
		}
	}
	return b.String()
}

// JSON renders the status as indented JSON.
func (s Status) JSON() ([]byte, error) { return json.MarshalIndent(s, "", "  ") }

// dollars formats a cost: cents, or four decimals below a dollar's tenth.
func dollars(usd float64) string {
	if usd != 0 && usd < 0.1 {
		return fmt.Sprintf("$%.4f", usd)
	}
	return fmt.Sprintf("$%.2f", usd)
}

func short(commit string) string {
	if len(commit) > 12 {
		return commit[:12]
	}
	return commit
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n-1] + "…"
}

func joinIDs(ids []foreman.ItemID) string {
	parts := make([]string, len(ids))
	for i, id := range ids {
		parts[i] = string(id)
	}
	return strings.Join(parts, ", ")
}

func joinActions(as []Action) string {
	parts := make([]string, len(as))
	for i, a := range as {
		parts[i] = string(a)
	}
	return strings.Join(parts, ", ")
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

// lastResult is the result line of the latest stage that has one.
func lastResult(st pipeline.State) string {
	for i := min(st.Stage, len(st.Stages)-1); i >= 0; i-- {
		if r := st.Stages[i].Result; r != "" {
			return fmt.Sprintf("%d: %s", i, r)
		}
	}
	return ""
}

func causeOf(stories []StoryStatus, id foreman.ItemID) string {
	for _, s := range stories {
		if s.ID == id {
			return s.WorkerCause
		}
	}
	return ""
}

// graphText is the dependency graph's report without its line of
// commands, which are the task graph coordinator's ("resume", "check"),
// not the team's.
func graphText(rep taskgraph.StatusReport) string {
	lines := strings.SplitAfter(rep.Text(), "\n")
	out := lines[:0]
	for _, l := range lines {
		if !strings.Contains(l, "] Commands: ") {
			out = append(out, l)
		}
	}
	return strings.Join(out, "")
}

// teamAdvice returns a copy of a pause's escalation whose suggested action
// speaks of the team's Resolve actions rather than the story flow's stage
// numbers.
func teamAdvice(e *pipeline.Escalation) *pipeline.Escalation {
	if e == nil {
		return nil
	}
	c := *e
	switch c.Reason {
	case pipeline.ReasonMergeConflict:
		c.SuggestedAction = "in the story's worktree, rebase its branch onto the target and resolve the conflict" +
			" (or fix the target), then Resolve with resume: the quality gate runs again and the story merges"
	case pipeline.ReasonCrashed:
		c.SuggestedAction = "read the worker's cause; when it is fixed, Resolve with retry to run the stage again"
	case pipeline.ReasonRetriesExhausted:
		c.SuggestedAction = "read the feedback; change the story (add a new one) or fix the work by hand, then Resolve" +
			" with retry (the stage again) or resume (go on), or skip or abandon it"
	default:
		c.SuggestedAction = "read the cause and fix it, then Resolve with retry (the stage again) or resume" +
			" (go on after a fix by hand), or skip or abandon the story"
	}
	return &c
}
