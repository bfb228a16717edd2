package taskgraph

import (
	"math/bits"
	"slices"
)

// The graph keeps, beside each task's state, what a step asks of the whole
// graph so that a step costs what it touches rather than the size of the
// graph: how many tasks have each status, how many blockers of each task
// are not completed, the set of ready tasks (pending, every blocker
// completed) as a bitset in creation order, and the tasks whose state
// changed since the runtime last saved them. Every change of a status goes
// through setStatus, which keeps them up to date.

// initIndex computes the index of a graph whose specs, state and blockers
// are set.
func (g *Graph) initIndex() {
	n := len(g.specs)
	g.dependents = make([][]int32, n)
	for i, bs := range g.blockers {
		for _, b := range bs {
			g.dependents[b] = append(g.dependents[b], int32(i))
		}
	}
	g.counts = [numStatuses]int{}
	g.unmet = make([]int32, n)
	g.readyBits = make([]uint64, (n+63)/64)
	g.nReady = 0
	for i := range g.state {
		g.counts[g.state[i].Status]++
		for _, b := range g.blockers[i] {
			if g.state[b].Status != Completed {
				g.unmet[i]++
			}
		}
		if g.state[i].Status == Pending && g.unmet[i] == 0 {
			g.setReady(i, true)
		}
	}
}

// setReady records whether task i is ready.
func (g *Graph) setReady(i int, ready bool) {
	w, bit := i/64, uint64(1)<<(uint(i)%64)
	was := g.readyBits[w]&bit != 0
	switch {
	case ready && !was:
		g.readyBits[w] |= bit
		g.nReady++
	case !ready && was:
		g.readyBits[w] &^= bit
		g.nReady--
	}
}

// setStatus changes task i's status, keeping the index.
func (g *Graph) setStatus(i int, to Status) {
	from := g.state[i].Status
	g.touch(i)
	if from == to {
		return
	}
	g.counts[from]--
	g.counts[to]++
	g.state[i].Status = to
	g.setReady(i, to == Pending && g.unmet[i] == 0)
	if (from == Completed) == (to == Completed) {
		return
	}
	for _, d := range g.dependents[i] {
		if to == Completed {
			g.unmet[d]--
		} else {
			g.unmet[d]++
		}
		g.setReady(int(d), g.state[d].Status == Pending && g.unmet[d] == 0)
	}
}

// touch notes that task i's state changed since the runtime last saved it.
func (g *Graph) touch(i int) { g.touched = append(g.touched, int32(i)) }

// firstReady returns up to n ready tasks in creation order.
func (g *Graph) firstReady(n int) []int32 {
	var out []int32
	for w, word := range g.readyBits {
		for word != 0 && len(out) < n {
			b := bits.TrailingZeros64(word)
			out = append(out, int32(w*64+b))
			word &^= 1 << uint(b)
		}
		if len(out) >= n {
			break
		}
	}
	return out
}

// cloneIndex copies the parts of the index a status change writes.
func (g *Graph) cloneIndex(from *Graph) {
	g.dependents = from.dependents
	g.counts = from.counts
	g.unmet = slices.Clone(from.unmet)
	g.readyBits = slices.Clone(from.readyBits)
	g.nReady = from.nReady
	g.touched = slices.Clone(from.touched)
}

// takeTouched returns the distinct tasks changed since the last call, in
// creation order, and forgets them.
func (g *Graph) takeTouched() []int {
	if len(g.touched) == 0 {
		return nil
	}
	slices.Sort(g.touched)
	out := make([]int, 0, len(g.touched))
	for k, i := range g.touched {
		if k == 0 || g.touched[k-1] != i {
			out = append(out, int(i))
		}
	}
	g.touched = g.touched[:0]
	return out
}

// inProgressWithWorker counts the distinct in-progress tasks that have an
// active worker; fewer than the in-progress tasks means an orphan.
func (s *Session) inProgressWithWorker() int {
	n := 0
	for k, w := range s.ActiveWorkers {
		ti, ok := s.Graph.index[w.Task]
		if !ok || s.Graph.state[ti].Status != InProgress {
			continue
		}
		dup := false
		for _, o := range s.ActiveWorkers[:k] {
			if o.Task == w.Task {
				dup = true
				break
			}
		}
		if !dup {
			n++
		}
	}
	return n
}

// hasOrphans reports whether some in-progress task has no active worker.
func (s *Session) hasOrphans() bool {
	return s.Graph.counts[InProgress] > s.inProgressWithWorker()
}
