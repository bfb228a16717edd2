package taskgraph

import (
	"fmt"
	"strings"
)

// Check names one row of the coordinator's validation table.
type Check string

const (
	// CheckSessionConsistent: active_workers matches the task list — every
	// active worker names an existing task whose current assignment it
	// holds, one worker per task. (A worker whose task has finished but
	// whose callback is not processed yet is not a violation.)
	CheckSessionConsistent Check = "session_consistent"
	// CheckNoOrphans: every in-progress task has an active worker.
	CheckNoOrphans Check = "no_orphaned_tasks"
	// CheckCompleteness: every task the mode expects exists.
	CheckCompleteness Check = "pipeline_completeness"
	// CheckCompletion: a session marked completed has nothing left to do.
	CheckCompletion Check = "completion_detection"
	// CheckRoles: every task's role is a known role.
	CheckRoles Check = "known_roles"
)

// Violation is one failed check.
type Violation struct {
	Check  Check  `json:"check"`
	Task   string `json:"task,omitempty"`
	Detail string `json:"detail"`
}

func (v Violation) String() string { return fmt.Sprintf("%s: %s", v.Check, v.Detail) }

func violationsText(vs []Violation) string {
	parts := make([]string, len(vs))
	for i, v := range vs {
		parts[i] = v.String()
	}
	return strings.Join(parts, "; ")
}

// missing lists the mode's expected tasks that do not exist.
func (c *Core) missing(s *Session) []string {
	var out []string
	for _, subject := range c.expectedFor(s.Mode) {
		if _, ok := s.Graph.index[subject]; !ok {
			out = append(out, subject)
		}
	}
	return out
}

// Validate runs the validation table over a session and
// returns every violation; none means the session is consistent.
func (c *Core) Validate(s *Session) []Violation {
	out := c.validateState(s)
	for i := range s.Graph.specs {
		t := &s.Graph.specs[i]
		if !containsString(c.roles, t.Role) {
			out = append(out, Violation{Check: CheckRoles, Task: t.Subject, Detail: fmt.Sprintf("%s is owned by unknown role %q", t.Subject, t.Role)})
		}
	}
	if m := c.missing(s); len(m) > 0 {
		out = append(out, Violation{Check: CheckCompleteness, Detail: fmt.Sprintf("mode %s expects tasks that do not exist: %s", s.Mode, strings.Join(m, ", "))})
	}
	return out
}

// validateState runs the checks a step can break: consistency of
// active_workers, orphans, completion. The graph's shape (which tasks
// exist, their roles) does not change in a step; Validate checks it.
func (c *Core) validateState(s *Session) []Violation {
	var out []Violation
	g := s.Graph
	for i, w := range s.ActiveWorkers {
		ti, ok := g.index[w.Task]
		switch {
		case !ok:
			out = append(out, Violation{Check: CheckSessionConsistent, Task: w.Task, Detail: fmt.Sprintf("active worker %s (%s) names no task", w.Assignment, w.Role)})
		case g.state[ti].Assignment != w.Assignment:
			out = append(out, Violation{Check: CheckSessionConsistent, Task: w.Task, Detail: fmt.Sprintf("active worker holds assignment %s, the task's is %q", w.Assignment, g.state[ti].Assignment)})
		}
		for _, other := range s.ActiveWorkers[:i] {
			if other.Task == w.Task {
				out = append(out, Violation{Check: CheckSessionConsistent, Task: w.Task, Detail: "two active workers for one task"})
			}
		}
	}
	// The counts say whether there is an orphan; only then is every task
	// looked at, to name them.
	for i := range g.specs {
		if i == 0 && !s.hasOrphans() {
			break
		}
		t := &g.specs[i]
		if g.state[i].Status == InProgress && s.workerIndexByTask(t.Subject) < 0 {
			out = append(out, Violation{Check: CheckNoOrphans, Task: t.Subject, Detail: t.Subject + " is in progress with no active worker ('resume' resets it)"})
		}
	}
	if s.Status == SessionCompleted {
		if n := g.Count(Pending) + g.Count(InProgress) + g.Count(Failed) + g.Count(Parked); n > 0 {
			out = append(out, Violation{Check: CheckCompletion, Detail: fmt.Sprintf("session is completed but %d task(s) are not done", n)})
		}
	}
	return out
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
