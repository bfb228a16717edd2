package team

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
)

// EventLanding: a Lander (Config.Merger) reported the end of a story's
// landing other than its merge: its change refused with feedback for the
// builder (a failing check, a review requesting changes; Outcome and
// Detail), or a cause a person must act on (the pull request closed).
// The merge itself is EventStoryMerged.
const EventLanding EventKind = "landing"

// watchLanding runs the Lander's Watch for the Run when Config.Merger is
// a pipeline.Lander (pipeline/team/ghland's pull request lander): its
// reports reach the pipeline as events (merged, refused with a cause,
// rejected with feedback for the builder), and the Run follows the story
// from there as after its own merge. Watch ends with the Run; an error
// from it (not the Run's end) is a system fault.
func (t *Team) watchLanding(rs *runState) {
	l, ok := t.cfg.Merger.(pipeline.Lander)
	if !ok {
		return
	}
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		err := l.Watch(rs.ctx, func(ctx context.Context, item foreman.ItemID, ev pipeline.Event) error {
			st, effs, err := rs.co.Handle(ctx, item, ev)
			if err != nil {
				return err // a *pipeline.TransitionError: taken before
			}
			if ev.Kind != pipeline.EventMerged {
				t.events.add(Event{Kind: EventLanding, At: t.clk.Now(), Story: item, Stage: st.Stage, Role: t.role(st.Stage),
					Outcome: ev.Outcome, Detail: ev.Detail})
			}
			t.carry(rs, effs)
			return nil
		})
		if err != nil && rs.ctx.Err() == nil {
			rs.fail(fmt.Errorf("team: following the landings: %w", err))
		}
	}()
}
