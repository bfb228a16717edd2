package team

import (
	"context"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// coordHost is what the Run's coordinator (teamcore.Coordinator) asks the
// team: the plan's titles, a person's decisions and conflict triage.
type coordHost struct{ t *Team }

func (h coordHost) Title(item foreman.ItemID) (string, error) {
	s, ok := h.t.story(item)
	if !ok {
		return "", fmt.Errorf("%w: %s", ErrUnknownStory, item)
	}
	return s.Title, nil
}

func (h coordHost) Decision(ctx context.Context, st pipeline.State) (*teamcore.Decision, error) {
	d, err := h.t.decisionOf(ctx, st.Item)
	if err != nil || d == nil {
		return nil, err
	}
	cd := d.core(st.Pause)
	return &cd, nil
}

func (h coordHost) DecisionTaken(ctx context.Context, item foreman.ItemID) error {
	return h.t.clearDecision(ctx, item)
}

func (h coordHost) ReworkDue(ctx context.Context, st pipeline.State) (int, bool, error) {
	return h.t.reworkDue(ctx, st)
}

func (h coordHost) GrantRework(ctx context.Context, st pipeline.State, stage int) (string, error) {
	return h.t.grantRework(ctx, st, stage)
}

// core is the decision as the coordinator acts on it, for a story paused
// with pause.
func (d decision) core(pause *pipeline.Escalation) teamcore.Decision {
	cd := teamcore.Decision{Stage: d.Stage, At: d.At, To: taskgraph.Pending, Pause: d.Pause}
	switch d.Action {
	case Skip:
		cd.To = taskgraph.Completed
	case Abandon:
		cd.To = taskgraph.Cancelled
	default:
		cd.Feedback = resolveFeedback(d.Action, d.Note, pause)
	}
	return cd
}
