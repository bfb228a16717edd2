package teamsim

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// kindDecision is where the simulated person's decisions are kept: in the
// store, so that a crash may lose or keep them as it would the team's,
// recorded, read and forgotten by the team's own code
// (teamcore.RecordDecision, KeptDecisionOf, ForgetDecision), as the
// coordinator acts on them (teamcore.Decision).
const kindDecision = "teamsim.decision"

// simHost is what the coordinator asks the team (the team's coordHost):
// titles, a person's decisions, and conflict triage (triage.go).
type simHost struct{ w *world }

func (h simHost) Title(item foreman.ItemID) (string, error) {
	if _, ok := h.w.stories[item]; !ok {
		return "", fmt.Errorf("teamsim: unknown story %s", item)
	}
	return "story " + string(item), nil
}

func (h simHost) Decision(ctx context.Context, st pipeline.State) (*teamcore.Decision, error) {
	return teamcore.KeptDecisionOf[teamcore.Decision](ctx, h.w.store, kindDecision, st.Item)
}

func (h simHost) DecisionTaken(ctx context.Context, item foreman.ItemID) error {
	return teamcore.ForgetDecision(ctx, h.w.store, kindDecision, item)
}

func (h simHost) ReworkDue(ctx context.Context, st pipeline.State) (int, bool, error) {
	return teamcore.ReworkDue(ctx, h.w.store, st, h.w.reworkStage)
}

func (h simHost) GrantRework(ctx context.Context, st pipeline.State, _ int) (string, error) {
	rec, _, err := teamcore.GrantRework(ctx, h.w.store, st)
	return fmt.Sprintf("Your work no longer merges onto main: rebasing it conflicts in %v.", rec.Files), err
}

// reworkStage is the build stage a conflicting story goes back to (the
// team's reworkStage): the stage before the flow's last (the story
// flow's execute), or -1 for a flow of one stage.
func (w *world) reworkStage(paused int) int { return min(paused, len(w.cfg.Flow.Stages)-2) }

// personState is the simulated person: it decides about some paused
// stories (Faults.Person), at most twice per story, within seconds or up
// to an hour after the pause, as a person using Team.Resolve would.
type personState struct {
	decided map[foreman.ItemID]int
	// pending counts the decisions still to come; a Run that finished
	// while one is pending is run again once it is made (a host that
	// keeps serving its page, then runs again).
	pending int
	// restarts: the pauses (by key) a person decided to retry or resume;
	// skipped: the stories a person skipped.
	restarts map[string]bool
	skipped  map[foreman.ItemID]bool
}

func (p *personState) init() {
	p.decided, p.restarts, p.skipped = map[foreman.ItemID]int{}, map[string]bool{}, map[foreman.ItemID]bool{}
}

// paused may have a person decide about a story that paused.
func (p *personState) paused(w *world, st pipeline.State) {
	if st.Pause == nil || p.decided[st.Item] >= 2 || w.rng.Float64() >= w.cfg.Faults.Person {
		return
	}
	p.decided[st.Item]++
	p.pending++
	to := [...]taskgraph.Status{taskgraph.Pending, taskgraph.Pending, taskgraph.Completed, taskgraph.Cancelled}[w.rng.IntN(4)]
	resume := w.rng.IntN(2) == 0
	item, key := st.Item, st.Pause.Key
	// A person watching decides within seconds (before the team may have
	// parked the story's task); others up to an hour later.
	within := time.Hour
	if w.rng.IntN(4) == 0 {
		within = 10 * time.Second
	}
	d := time.Duration(w.rng.Int64N(int64(within)))
	w.schedule(d, 0, fmt.Sprintf("person decides %s %s", item, to), func() {
		p.pending--
		w.decide(item, key, to, resume)
	})
}

// decide is a person's Team.Resolve: a decision about the pause the story
// is in (none about a story not paused there any more), validated and kept
// by Resolve's own code (teamcore.RecordDecision: none when the story is
// not paused or the pause was decided already), then carried to the Run in
// progress or, when none is, to the next.
func (w *world) decide(item foreman.ItemID, key string, to taskgraph.Status, resume bool) {
	c := w.c
	ctx := w.ctx
	st, err := c.pipe.Get(ctx, item)
	if err != nil {
		c.fault("reading "+string(item), err)
		return
	}
	if st.Pause == nil || st.Pause.Key != key {
		return // the person saw another pause
	}
	d := teamcore.Decision{To: to, Stage: teamcore.ResolveStage(resume, st.Stage, len(w.cfg.Flow.Stages)),
		Feedback: "A person sent this story back to work.", At: w.now(), Pause: key}
	dup, err := teamcore.RecordDecision(ctx, w.store, kindDecision, st, d)
	switch {
	case errors.Is(err, teamcore.ErrNotPaused) || dup:
		return // not paused, or decided already: Resolve's error, or a double click
	case err != nil:
		c.fault("recording a decision about "+string(item), err)
		return
	}
	w.tracef("person: %s %s (stage %d)", item, to, d.Stage)
	switch to {
	case taskgraph.Pending:
		w.person.restarts[key] = true
	case taskgraph.Completed:
		w.person.skipped[item] = true
	}
	if c.finished {
		// The Run ended; the host runs again, which carries the decision
		// out (Coordinator.Recover).
		w.rerun()
		return
	}
	effs, err := c.co.Decided(ctx, item)
	c.settle("carrying out a decision about "+string(item), effs, err)
}
