package phases

import "slices"

// The copies below share no slice with their original. The run loop and the
// orchestrator give every handler call its own, so that a handler that
// modifies what it was given (a check's argv, the dirty files) cannot change
// what later handlers and iterations see.

func (pc *PhaseContext) clone() *PhaseContext {
	c := *pc
	c.Task = pc.Task.clone()
	c.BeforeState = pc.BeforeState.clone()
	return &c
}

func (t TaskSpec) clone() TaskSpec {
	t.GatePlan = t.GatePlan.clone()
	t.Agent.AllowedTools = slices.Clone(t.Agent.AllowedTools)
	return t
}

func (p GatePlan) clone() GatePlan {
	p.Levels = slices.Clone(p.Levels)
	for i := range p.Levels {
		l := &p.Levels[i]
		l.Checks = slices.Clone(l.Checks)
		for j := range l.Checks {
			c := &l.Checks[j]
			c.Argv, c.Env = slices.Clone(c.Argv), slices.Clone(c.Env)
		}
	}
	return p
}

func (b BeforeState) clone() BeforeState {
	b.DirtyFiles = slices.Clone(b.DirtyFiles)
	return b
}
