package taskgraph

import (
	"fmt"
	"slices"
	"strings"
	"time"

	foreman "github.com/agentforeman/foreman"
)

// StatusReport is what handleCheck reports, as data; Text renders the
// "[coordinator] Pipeline Status" block from it.
type StatusReport struct {
	Session   string        `json:"session"`
	Mode      Mode          `json:"mode"`
	State     SessionStatus `json:"state"`
	Completed int           `json:"completed"`
	Total     int           `json:"total"`
	Percent   int           `json:"percent"`
	// Graph is the execution graph: phases of lines of tasks.
	Graph         []PhaseView  `json:"graph"`
	ActiveWorkers []WorkerView `json:"active_workers"`
	Ready         []string     `json:"ready"`
	// Parked lists the tasks waiting for a person.
	Parked []string `json:"parked,omitempty"`
	// MaxActive is the core's limit of tasks in progress (0: none); ready
	// tasks held back by it are in Ready.
	MaxActive int `json:"max_active,omitempty"`
	// Checkpoint names the checkpoint the session is paused at.
	Checkpoint string `json:"checkpoint,omitempty"`
	// Stalled: nothing ready, nothing running, not complete; Blocked and
	// Missing say why.
	Stalled    bool          `json:"stalled"`
	Blocked    []BlockedTask `json:"blocked,omitempty"`
	Missing    []string      `json:"missing,omitempty"`
	Counters   Counters      `json:"counters"`
	Violations []Violation   `json:"violations,omitempty"`
	At         time.Time     `json:"at"`
}

// PhaseView is one phase of the execution graph ("Spec Phase").
type PhaseView struct {
	Name  string     `json:"name"`
	Lines []LineView `json:"lines"`
}

// LineView is one line of a phase: a chain of tasks, on a branch ("BE",
// "FE") when the phase forks. In the "Tasks" phase of a custom graph a
// line holds one task, shown with its blockers, and Level is its depth
// in the graph (0: blocked by no task of that phase; otherwise one more
// than its deepest blocker's).
type LineView struct {
	Branch string     `json:"branch,omitempty"`
	Level  int        `json:"level,omitempty"`
	Tasks  []TaskView `json:"tasks"`
}

// TaskView is one task in the graph. Status is "not_created" for a task
// the mode expects that does not exist yet. BlockedBy is filled only for
// the tasks of a custom graph (the built-in modes' chains show their
// dependencies by position).
type TaskView struct {
	Subject   string   `json:"subject"`
	Role      string   `json:"role,omitempty"`
	Status    string   `json:"status"`
	Icon      string   `json:"icon"`
	BlockedBy []string `json:"blocked_by,omitempty"`
}

// WorkerView is one active worker.
type WorkerView struct {
	Task       string               `json:"task"`
	Role       string               `json:"role"`
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// SpawnedAt is zero and ElapsedText "unknown" for an in-progress task
	// with no active worker.
	SpawnedAt   time.Time     `json:"spawned_at,omitempty"`
	Elapsed     time.Duration `json:"elapsed_ns"`
	ElapsedText string        `json:"elapsed"`
}

const notCreated = "not_created"

// Icons of the execution graph: one per task status, and one for a task
// the mode expects that does not exist yet.
func icon(status string) string {
	switch status {
	case "completed":
		return "done"
	case "in_progress":
		return ">>>"
	case "pending":
		return "o"
	case "failed":
		return "x"
	case "cancelled":
		return "-"
	case "parked":
		return "||"
	}
	return "."
}

// Status builds the status report of a session at time at.
func (c *Core) Status(s *Session, at time.Time) StatusReport {
	g := s.Graph
	r := StatusReport{
		Session: s.ID, Mode: s.Mode, State: s.Status, Checkpoint: s.Checkpoint,
		Counters: s.Counters, At: at, Ready: g.Ready(), Missing: c.missing(s), MaxActive: c.maxActive,
		ActiveWorkers: []WorkerView{},
	}
	// Display order: the mode's expected chain, then every other task in
	// creation order.
	var order []TaskView
	seen := make(map[string]bool, g.Len())
	// A custom pipeline's tasks not created yet still show their blockers.
	var expectedSpecs map[string]TaskSpec
	if len(r.Missing) > 0 {
		specs, _ := c.pipelines(s.Mode)
		expectedSpecs = make(map[string]TaskSpec, len(specs))
		for _, sp := range specs {
			expectedSpecs[sp.Subject] = sp
		}
	}
	add := func(subject string) {
		if seen[subject] {
			return
		}
		seen[subject] = true
		tv := TaskView{Subject: subject, Status: notCreated}
		if i, ok := g.index[subject]; ok {
			tv.Role, tv.Status = g.specs[i].Role, g.state[i].Status.String()
			if phaseOf(subject) == phaseOther {
				tv.BlockedBy = slices.Clone(g.specs[i].BlockedBy)
			}
		} else if sp, ok := expectedSpecs[subject]; ok && phaseOf(subject) == phaseOther {
			tv.Role, tv.BlockedBy = sp.Role, slices.Clone(sp.BlockedBy)
		}
		tv.Icon = icon(tv.Status)
		order = append(order, tv)
	}
	for _, subject := range c.expectedFor(s.Mode) {
		add(subject)
	}
	for i := range g.specs {
		add(g.specs[i].Subject)
	}
	r.Total = len(order)
	r.Completed = g.Count(Completed)
	if r.Total > 0 {
		r.Percent = (200*r.Completed + r.Total) / (2 * r.Total) // rounded half up
	}
	r.Graph = layout(order)
	for i := range g.specs {
		t := &g.specs[i]
		if g.state[i].Status != InProgress {
			continue
		}
		wv := WorkerView{Task: t.Subject, Role: t.Role, ElapsedText: "unknown"}
		if wi := s.workerIndexByTask(t.Subject); wi >= 0 {
			w := s.ActiveWorkers[wi]
			wv.Assignment, wv.SpawnedAt = w.Assignment, w.SpawnedAt
			wv.Elapsed = at.Sub(w.SpawnedAt)
			wv.ElapsedText = elapsedText(wv.Elapsed)
		}
		r.ActiveWorkers = append(r.ActiveWorkers, wv)
	}
	for i := range g.specs {
		if g.state[i].Status == Parked {
			r.Parked = append(r.Parked, g.specs[i].Subject)
		}
	}
	if len(r.Ready) == 0 && len(r.ActiveWorkers) == 0 && s.Status != SessionCompleted &&
		(len(r.Missing) > 0 || g.Count(Pending)+g.Count(Failed)+g.Count(Parked) > 0) {
		r.Stalled, r.Blocked = true, g.Blocked()
	}
	r.Violations = c.Validate(s)
	return r
}

// elapsedText is a worker's elapsed time as the report shows it: "<1m",
// "42m", "2h5m".
func elapsedText(d time.Duration) string {
	mins := int(d / time.Minute)
	switch {
	case mins < 1:
		return "<1m"
	case mins < 60:
		return fmt.Sprintf("%dm", mins)
	}
	return fmt.Sprintf("%dh%dm", mins/60, mins%60)
}

// layout groups tasks into the report's phases: a spec phase in one
// chain; an impl phase that forks into BE and FE branches after PLAN when
// it has both, and is one chain otherwise; anything else (a custom graph)
// under "Tasks", by dependency level.
func layout(order []TaskView) []PhaseView {
	var spec, plan, be, fe, other []TaskView
	for _, tv := range order {
		switch phaseOf(tv.Subject) {
		case phaseSpec:
			spec = append(spec, tv)
		case phasePlan:
			plan = append(plan, tv)
		case phaseBackend:
			be = append(be, tv)
		case phaseFrontend:
			fe = append(fe, tv)
		default:
			other = append(other, tv)
		}
	}
	var out []PhaseView
	if len(spec) > 0 {
		out = append(out, PhaseView{Name: "Spec Phase", Lines: []LineView{{Tasks: spec}}})
	}
	switch {
	case len(be) > 0 && len(fe) > 0:
		var lines []LineView
		if len(plan) > 0 {
			lines = append(lines, LineView{Tasks: plan})
		}
		lines = append(lines, LineView{Branch: "BE", Tasks: be}, LineView{Branch: "FE", Tasks: fe})
		out = append(out, PhaseView{Name: "Impl Phase", Lines: lines})
	case len(plan)+len(be)+len(fe) > 0:
		chain := append(append(append([]TaskView{}, plan...), be...), fe...)
		out = append(out, PhaseView{Name: "Impl Phase", Lines: []LineView{{Tasks: chain}}})
	}
	if len(other) > 0 {
		out = append(out, PhaseView{Name: "Tasks", Lines: dependencyLines(other)})
	}
	return out
}

// dependencyLines lays out the tasks of a custom graph by dependency
// level, one task per line with its blockers, so that fan-outs and joins
// stay visible: level 0 first (blocked by none of these tasks), then each
// task one level below its deepest blocker; creation order within a level.
func dependencyLines(tasks []TaskView) []LineView {
	pos := make(map[string]int, len(tasks))
	for i, tv := range tasks {
		pos[tv.Subject] = i
	}
	const unknown, visiting = -1, -2
	level := make([]int, len(tasks))
	for i := range level {
		level[i] = unknown
	}
	// The graph is acyclic when created; a custom pipeline's expected
	// tasks are not validated, so a cycle among them counts as level 0.
	var depth func(i int) int
	depth = func(i int) int {
		switch level[i] {
		case visiting:
			return 0
		case unknown:
		default:
			return level[i]
		}
		level[i] = visiting
		d := 0
		for _, b := range tasks[i].BlockedBy {
			if j, ok := pos[b]; ok {
				d = max(d, depth(j)+1)
			}
		}
		level[i] = d
		return d
	}
	lines := make([]LineView, len(tasks))
	for i, tv := range tasks {
		lines[i] = LineView{Level: depth(i), Tasks: []TaskView{tv}}
	}
	slices.SortStableFunc(lines, func(a, b LineView) int { return a.Level - b.Level })
	return lines
}

func chainText(tasks []TaskView) string {
	parts := make([]string, len(tasks))
	for i, tv := range tasks {
		parts[i] = "[" + tv.Icon + " " + tv.Subject + "]"
	}
	return strings.Join(parts, " → ")
}

// Text renders the report:
//
//	[coordinator] Pipeline Status
//	[coordinator] Mode: <mode> | Progress: <completed>/<total> (<percent>%)
//
//	[coordinator] Execution Graph:
//	  Spec Phase:
//	    [<icon> RESEARCH-001] → [<icon> DISCUSS-001] → ...
//	  Impl Phase:
//	    [<icon> PLAN-001]
//	      ├─ BE: [<icon> IMPL-001] → [<icon> TEST-001] → [<icon> REVIEW-001]
//	      └─ FE: [<icon> DEV-FE-001] → [<icon> QA-FE-001]
//
//	  done=completed  >>>=running  o=pending  .=not created
//
//	[coordinator] Active Workers:
//	  > <subject> (<role>) - running <elapsed>
//
//	[coordinator] Ready to spawn: <subjects>
//	[coordinator] Commands: 'resume' to advance | 'check' to refresh
//
// Sections with nothing to show are left out. The legend gains "x=failed",
// "-=cancelled" and "||=parked" only when such a task is shown; parked
// tasks get a line of their own ("Parked, waiting for a person"); a paused or
// stalled session gets one line saying so before the commands. The tasks
// of a custom graph are one per line under "Tasks", each followed by
// "← <blockers>" when it has any.
func (r StatusReport) Text() string {
	var b strings.Builder
	b.WriteString(tag + "Pipeline Status\n")
	fmt.Fprintf(&b, "%sMode: %s | Progress: %d/%d (%d%%)\n\n", tag, r.Mode, r.Completed, r.Total, r.Percent)
	b.WriteString(tag + "Execution Graph:\n")
	var failed, cancelled, parked bool
	for _, ph := range r.Graph {
		fmt.Fprintf(&b, "  %s:\n", ph.Name)
		for i, ln := range ph.Lines {
			for _, tv := range ln.Tasks {
				failed = failed || tv.Status == "failed"
				cancelled = cancelled || tv.Status == "cancelled"
				parked = parked || tv.Status == "parked"
			}
			switch {
			case len(ln.Tasks) == 1 && len(ln.Tasks[0].BlockedBy) > 0:
				fmt.Fprintf(&b, "    %s ← %s\n", chainText(ln.Tasks), strings.Join(ln.Tasks[0].BlockedBy, ", "))
			case ln.Branch == "":
				fmt.Fprintf(&b, "    %s\n", chainText(ln.Tasks))
			case i == len(ph.Lines)-1:
				fmt.Fprintf(&b, "      └─ %s: %s\n", ln.Branch, chainText(ln.Tasks))
			default:
				fmt.Fprintf(&b, "      ├─ %s: %s\n", ln.Branch, chainText(ln.Tasks))
			}
		}
	}
	b.WriteString("\n  done=completed  >>>=running  o=pending  .=not created")
	if failed {
		b.WriteString("  x=failed")
	}
	if cancelled {
		b.WriteString("  -=cancelled")
	}
	if parked {
		b.WriteString("  ||=parked")
	}
	b.WriteString("\n\n")
	if len(r.ActiveWorkers) > 0 {
		b.WriteString(tag + "Active Workers:\n")
		for _, w := range r.ActiveWorkers {
			fmt.Fprintf(&b, "  > %s (%s) - running %s\n", w.Task, w.Role, w.ElapsedText)
		}
		b.WriteString("\n")
	}
	if len(r.Ready) > 0 {
		fmt.Fprintf(&b, "%sReady to spawn: %s", tag, strings.Join(r.Ready, ", "))
		if r.MaxActive > 0 && len(r.ActiveWorkers) >= r.MaxActive {
			fmt.Fprintf(&b, " (at most %d active at once)", r.MaxActive)
		}
		b.WriteString("\n")
	}
	if len(r.Parked) > 0 {
		fmt.Fprintf(&b, "%sParked, waiting for a person: %s\n", tag, strings.Join(r.Parked, ", "))
	}
	if r.Checkpoint != "" {
		fmt.Fprintf(&b, "%sPaused at checkpoint %s: 'resume' to continue\n", tag, r.Checkpoint)
	}
	if r.Stalled {
		parts := make([]string, 0, len(r.Blocked)+1)
		for _, bt := range r.Blocked {
			parts = append(parts, bt.String())
		}
		if len(r.Missing) > 0 {
			parts = append(parts, "missing "+strings.Join(r.Missing, ", "))
		}
		fmt.Fprintf(&b, "%sStalled: %s\n", tag, strings.Join(parts, "; "))
	}
	b.WriteString(tag + "Commands: 'resume' to advance | 'check' to refresh\n")
	return b.String()
}
