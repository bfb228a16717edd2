package taskgraph

import (
	"errors"
	"fmt"
	"slices"
	"strings"

	foreman "github.com/agentforeman/foreman"
)

// MaxSubjectLen bounds a task subject so that the assignment ids derived
// from it ("<subject>.<n>") stay valid ids.
const MaxSubjectLen = 48

// TaskSpec is a task to create.
type TaskSpec struct {
	// Subject names the task ("IMPL-001"). It is validated like an
	// foreman.ItemID, at most MaxSubjectLen characters.
	Subject string
	// Role is the worker role that owns it.
	Role        string
	Description string
	// BlockedBy lists the subjects that must all be completed first.
	BlockedBy []string
}

// Task is one task of a graph with its current status.
type Task struct {
	Subject     string   `json:"subject"`
	Role        string   `json:"owner"`
	Description string   `json:"description,omitempty"`
	BlockedBy   []string `json:"blockedBy,omitempty"`
	Status      Status   `json:"status"`
	// Assignment is the latest assignment spawned for the task: current
	// while it is in progress, the one that completed it once completed,
	// empty after a reset (the old assignment is stale from then on).
	Assignment foreman.AssignmentID `json:"assignment,omitempty"`
	// Attempts counts the workers spawned for it.
	Attempts int `json:"attempts,omitempty"`
}

// Errors of graph construction, matched with errors.Is; the typed errors
// below carry the details.
var (
	ErrCycle          = errors.New("taskgraph: dependency cycle")
	ErrUnknownBlocker = errors.New("taskgraph: unknown blocker")
	ErrUnknownRole    = errors.New("taskgraph: unknown role")
	ErrDuplicateTask  = errors.New("taskgraph: duplicate task")
)

// CycleError names the tasks of a dependency cycle, in blockedBy order:
// Cycle[0] is blocked by Cycle[1], ..., and the last by Cycle[0].
type CycleError struct{ Cycle []string }

func (e *CycleError) Error() string {
	return fmt.Sprintf("taskgraph: dependency cycle: %s -> %s", strings.Join(e.Cycle, " -> "), e.Cycle[0])
}

// Is makes errors.Is(err, ErrCycle) true.
func (e *CycleError) Is(target error) bool { return target == ErrCycle }

// UnknownBlockerError is a blockedBy entry that names no task.
type UnknownBlockerError struct{ Task, Blocker string }

func (e *UnknownBlockerError) Error() string {
	return fmt.Sprintf("taskgraph: task %s is blocked by unknown task %s", e.Task, e.Blocker)
}

// Is makes errors.Is(err, ErrUnknownBlocker) true.
func (e *UnknownBlockerError) Is(target error) bool { return target == ErrUnknownBlocker }

// UnknownRoleError is a task owned by a role outside the known set.
type UnknownRoleError struct {
	Task, Role string
	Known      []string
}

func (e *UnknownRoleError) Error() string {
	return fmt.Sprintf("taskgraph: task %s has unknown role %q (known: %s)", e.Task, e.Role, strings.Join(e.Known, ", "))
}

// Is makes errors.Is(err, ErrUnknownRole) true.
func (e *UnknownRoleError) Is(target error) bool { return target == ErrUnknownRole }

// DuplicateTaskError is a subject created twice.
type DuplicateTaskError struct{ Task string }

func (e *DuplicateTaskError) Error() string {
	return fmt.Sprintf("taskgraph: task %s already exists", e.Task)
}

// Is makes errors.Is(err, ErrDuplicateTask) true.
func (e *DuplicateTaskError) Is(target error) bool { return target == ErrDuplicateTask }

// ValidateSubject checks a subject like an ItemID (the error matches
// foreman.ErrInvalidID), at most MaxSubjectLen characters.
func ValidateSubject(subject string) error {
	if err := foreman.ItemID(subject).Validate(); err != nil {
		return err
	}
	if len(subject) > MaxSubjectLen {
		return fmt.Errorf("%w: task subject %q is longer than %d characters", foreman.ErrInvalidID, subject, MaxSubjectLen)
	}
	return nil
}

// Graph is a validated set of tasks: subjects unique and valid, roles
// known, every blocker an existing task, no cycles. A Graph is immutable
// to its users; the core copies it before changing a status.
type Graph struct {
	// specs, index and blockers change only when tasks are added, so
	// copies share them; a status change copies only state.
	specs []TaskSpec
	state []taskState
	index map[string]int
	// blockers[i] holds the indexes of specs[i].BlockedBy; dependents[i]
	// the tasks specs[i] blocks.
	blockers   [][]int32
	dependents [][]int32
	// The index (index.go): tasks by status, each task's blockers not
	// completed, the ready tasks, the tasks changed since the last save.
	counts    [numStatuses]int
	unmet     []int32
	readyBits []uint64
	nReady    int
	touched   []int32
}

// taskState is the part of a task that transitions change.
type taskState struct {
	Status     Status
	Attempts   int32
	Assignment foreman.AssignmentID
}

func (g *Graph) task(i int) Task {
	sp, st := g.specs[i], g.state[i]
	return Task{Subject: sp.Subject, Role: sp.Role, Description: sp.Description, BlockedBy: sp.BlockedBy,
		Status: st.Status, Assignment: st.Assignment, Attempts: int(st.Attempts)}
}

// NewGraph validates specs against roles (nil means DefaultRoles()) and
// returns a graph whose tasks are all pending.
func NewGraph(roles []string, specs ...TaskSpec) (*Graph, error) {
	return (&Graph{}).Add(roles, specs...)
}

// Add returns a new graph with specs appended as pending tasks, validated
// as NewGraph does; g is unchanged. Existing tasks cannot gain blockers,
// so only the new tasks can form a cycle.
func (g *Graph) Add(roles []string, specs ...TaskSpec) (*Graph, error) {
	if roles == nil {
		roles = DefaultRoles()
	}
	tasks := make([]Task, 0, g.Len()+len(specs))
	for i := range g.specs {
		tasks = append(tasks, g.task(i))
	}
	for _, sp := range specs {
		t := Task{Subject: sp.Subject, Role: sp.Role, Description: sp.Description, Status: Pending}
		for _, b := range sp.BlockedBy {
			if !slices.Contains(t.BlockedBy, b) {
				t.BlockedBy = append(t.BlockedBy, b)
			}
		}
		tasks = append(tasks, t)
	}
	return buildGraph(roles, tasks)
}

// buildGraph validates tasks (any statuses) and indexes them.
func buildGraph(roles []string, tasks []Task) (*Graph, error) {
	g := &Graph{
		specs: make([]TaskSpec, len(tasks)), state: make([]taskState, len(tasks)),
		index: make(map[string]int, len(tasks)), blockers: make([][]int32, len(tasks)),
	}
	for i, t := range tasks {
		g.specs[i] = TaskSpec{Subject: t.Subject, Role: t.Role, Description: t.Description, BlockedBy: t.BlockedBy}
		g.state[i] = taskState{Status: t.Status, Attempts: int32(t.Attempts), Assignment: t.Assignment}
		if int(t.Status) >= numStatuses {
			return nil, fmt.Errorf("%w: task %s has status %d", ErrInvalidStatus, t.Subject, t.Status)
		}
		if err := ValidateSubject(t.Subject); err != nil {
			return nil, err
		}
		if roles != nil && !slices.Contains(roles, t.Role) {
			return nil, &UnknownRoleError{Task: t.Subject, Role: t.Role, Known: slices.Clone(roles)}
		}
		if _, dup := g.index[t.Subject]; dup {
			return nil, &DuplicateTaskError{Task: t.Subject}
		}
		g.index[t.Subject] = i
	}
	for i, t := range tasks {
		idx := make([]int32, 0, len(t.BlockedBy))
		for _, b := range t.BlockedBy {
			j, ok := g.index[b]
			if !ok {
				return nil, &UnknownBlockerError{Task: t.Subject, Blocker: b}
			}
			idx = append(idx, int32(j))
		}
		g.blockers[i] = idx
	}
	if cycle := g.findCycle(); cycle != nil {
		return nil, &CycleError{Cycle: cycle}
	}
	g.initIndex()
	return g, nil
}

// findCycle returns the subjects of one cycle, or nil. Iterative DFS so a
// long chain cannot exhaust the stack.
func (g *Graph) findCycle() []string {
	const (
		white = iota
		grey
		black
	)
	color := make([]uint8, len(g.specs))
	parent := make([]int32, len(g.specs))
	type frame struct{ node, next int32 }
	for root := range g.specs {
		if color[root] != white {
			continue
		}
		stack := []frame{{node: int32(root)}}
		color[root] = grey
		parent[root] = -1
		for len(stack) > 0 {
			top := &stack[len(stack)-1]
			if int(top.next) == len(g.blockers[top.node]) {
				color[top.node] = black
				stack = stack[:len(stack)-1]
				continue
			}
			b := g.blockers[top.node][top.next]
			top.next++
			switch color[b] {
			case white:
				color[b] = grey
				parent[b] = top.node
				stack = append(stack, frame{node: b})
			case grey:
				// top.node is blocked by b, which is on the path: walk back
				// from top.node to b.
				var cycle []string
				for n := top.node; ; n = parent[n] {
					cycle = append(cycle, g.specs[n].Subject)
					if n == b {
						break
					}
				}
				slices.Reverse(cycle)
				return cycle
			}
		}
	}
	return nil
}

// Len is the number of tasks.
func (g *Graph) Len() int { return len(g.specs) }

// Tasks returns a copy of the tasks in creation order.
func (g *Graph) Tasks() []Task {
	out := make([]Task, g.Len())
	for i := range out {
		out[i] = g.task(i)
		out[i].BlockedBy = slices.Clone(out[i].BlockedBy)
	}
	return out
}

// Task returns one task by subject.
func (g *Graph) Task(subject string) (Task, bool) {
	i, ok := g.index[subject]
	if !ok {
		return Task{}, false
	}
	t := g.task(i)
	t.BlockedBy = slices.Clone(t.BlockedBy)
	return t, true
}

// IsReady reports the AND rule: the task is pending and every blocker is
// completed. A failed or cancelled blocker never counts.
func (g *Graph) IsReady(subject string) bool {
	i, ok := g.index[subject]
	return ok && g.ready(i)
}

func (g *Graph) ready(i int) bool {
	if g.state[i].Status != Pending {
		return false
	}
	for _, b := range g.blockers[i] {
		if g.state[b].Status != Completed {
			return false
		}
	}
	return true
}

// Ready lists the ready tasks in creation order.
func (g *Graph) Ready() []string {
	var out []string
	for _, i := range g.firstReady(g.nReady) {
		out = append(out, g.specs[i].Subject)
	}
	return out
}

// Count returns how many tasks have status s.
func (g *Graph) Count(s Status) int {
	if int(s) >= numStatuses {
		return 0
	}
	return g.counts[s]
}

// clone copies the task states and the index so a status can change
// without touching g.
func (g *Graph) clone() *Graph {
	c := &Graph{specs: g.specs, state: slices.Clone(g.state), index: g.index, blockers: g.blockers}
	c.cloneIndex(g)
	return c
}

// apply moves task i through ev using the transition table.
func (g *Graph) apply(i int, ev Event) error {
	to, err := NextStatus(g.specs[i].Subject, g.state[i].Status, ev)
	if err != nil {
		return err
	}
	g.setStatus(i, to)
	return nil
}

// setAssignment changes task i's assignment.
func (g *Graph) setAssignment(i int, a foreman.AssignmentID) {
	g.state[i].Assignment = a
	g.touch(i)
}

// BlockedTask says why a task cannot start.
type BlockedTask struct {
	Task   string `json:"task"`
	Status Status `json:"status"`
	// Blockers are the blockers that are not completed, with their status.
	Blockers []BlockerStatus `json:"blockers,omitempty"`
}

// BlockerStatus is one unmet blocker.
type BlockerStatus struct {
	Task   string `json:"task"`
	Status Status `json:"status"`
}

func (b BlockedTask) String() string {
	if len(b.Blockers) == 0 {
		return fmt.Sprintf("%s (%s)", b.Task, b.Status)
	}
	parts := make([]string, len(b.Blockers))
	for i, bl := range b.Blockers {
		parts[i] = fmt.Sprintf("%s (%s)", bl.Task, bl.Status)
	}
	return fmt.Sprintf("%s blocked by %s", b.Task, strings.Join(parts, ", "))
}

// Blocked lists every task that is neither completed nor cancelled nor
// ready nor running, with the blockers that hold it back.
func (g *Graph) Blocked() []BlockedTask {
	var out []BlockedTask
	for i, sp := range g.specs {
		st := g.state[i].Status
		if st == Completed || st == Cancelled || st == InProgress || g.ready(i) {
			continue
		}
		bt := BlockedTask{Task: sp.Subject, Status: st}
		for _, b := range g.blockers[i] {
			if s := g.state[b].Status; s != Completed {
				bt.Blockers = append(bt.Blockers, BlockerStatus{Task: g.specs[b].Subject, Status: s})
			}
		}
		out = append(out, bt)
	}
	return out
}
