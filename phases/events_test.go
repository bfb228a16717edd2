package phases_test

import (
	"context"
	"errors"
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases"
)

// Every defined event is emitted by some real path: drive the RunLoop (and
// through it the orchestrator and the real handlers) along each path,
// record what it emits, and compare with the full list.
func TestEveryEventIsEmittedByARealPath(t *testing.T) {
	type path struct {
		name   string
		opts   harnessOptions
		steps  []step
		cancel bool
	}
	paths := []path{
		{name: "fail then pass", steps: []step{fails("h1", "o1"), passes("h2")}},
		{name: "build failed", steps: []step{{agent: phases.AgentResult{ExitCode: 1}}}},
		{name: "snapshot failed", steps: []step{{agent: phases.AgentResult{Success: true}, snapErr: errors.New("git")}}},
		{name: "no changes", steps: []step{{agent: phases.AgentResult{Success: true}}, passes("h2")}},
		{name: "verifier exception", steps: []step{passes("h").with(func(s *step) { s.verifyErr = errors.New("gate") })}},
		{name: "max iterations", steps: []step{fails("h1", "o1"), fails("h2", "o2"), fails("h3", "o3")}},
		{name: "canceled", steps: []step{passes("h")}, cancel: true},
		{name: "before state failed", opts: harnessOptions{beforeErr: errors.New("git")}},
	}
	emitted := map[phases.RunEvent][]string{}
	for _, p := range paths {
		h := newHarness(t, p.opts, p.steps...)
		ctx, cancel := context.WithCancel(context.Background())
		if p.cancel {
			h.steps[0].during = func(ctx context.Context, _ phases.AgentRequest) error { cancel(); return ctx.Err() }
		}
		_, _ = h.run(ctx, phases.Limits{})
		cancel()
		for _, ev := range h.emitted() {
			emitted[ev] = append(emitted[ev], p.name)
		}
	}
	for _, ev := range phases.AllEvents() {
		assert.NotEmpty(t, emitted[ev], "%s is never emitted", ev)
	}
	assert.Len(t, emitted, len(phases.AllEvents()), "only defined events are emitted")
}
