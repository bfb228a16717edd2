package team

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
)

// Action is what a person decides about a paused story.
type Action string

const (
	// Retry runs the stage the story paused at again, with a fresh worker
	// and fresh budgets for it and the stages after it.
	Retry Action = "retry"
	// Resume goes on after a person fixed what the escalation named (in
	// the story's worktree, or elsewhere): from the next stage, or, for a
	// story paused at its last stage (a failed quality gate, a merge
	// conflict), that stage again, which re-checks and merges.
	Resume Action = "resume"
	// Skip marks the story finished without merging it (a person did it
	// by hand, or it is no longer needed): the stories after it may start.
	Skip Action = "skip"
	// Abandon gives the story up: it is not merged, and the stories after
	// it stay blocked.
	Abandon Action = "abandon"
)

// Actions lists the actions Resolve takes.
func Actions() []Action { return []Action{Retry, Resume, Skip, Abandon} }

// ErrNotPaused is matched when Resolve is asked about a story that is not
// waiting for a person (it runs, merged, or was resolved otherwise).
var ErrNotPaused = teamcore.ErrNotPaused

// ErrUnknownAction is matched for an action Resolve does not know.
var ErrUnknownAction = errors.New("team: unknown action")

// decision is a person's decision about a paused story, kept until the
// graph has acted on it (retry, resume) or for good (skip, abandon).
type decision struct {
	Action Action    `json:"action"`
	Stage  int       `json:"stage"`
	Note   string    `json:"note,omitempty"`
	At     time.Time `json:"at"`
	// Dropped: the story's source withdrew it before it started (Drop),
	// no person decided.
	Dropped bool `json:"dropped,omitempty"`
	// Pause is the key of the pause decided about: a retry's record that a
	// crash kept after the flow acted on it decides no later pause.
	Pause string `json:"pause,omitempty"`
}

// PauseKey implements teamcore.KeptDecision.
func (d decision) PauseKey() string { return d.Pause }

// ActionName implements teamcore.KeptDecision.
func (d decision) ActionName() string { return string(d.Action) }

// restarts reports whether the decision sends the story back to work.
func (d decision) restarts() bool { return d.Action == Retry || d.Action == Resume }

// resolveStage is the stage a decision restarts a story paused at stage
// in a flow of n stages.
func resolveStage(a Action, stage, n int) int { return teamcore.ResolveStage(a == Resume, stage, n) }

// Resolve records what a person decided about a paused story and has the
// team act on it: Retry and Resume put the story back to work (a running
// team starts it as soon as a worker slot is free; otherwise the next Run
// does), Skip lets the stories after it start, Abandon gives it up. note
// reaches the next worker as feedback.
//
// Resolve is idempotent: the same decision again, before the team has
// acted on it, changes nothing; any decision about a story that is not
// paused (it already went back to work) is an error matching ErrNotPaused.
func (t *Team) Resolve(ctx context.Context, story foreman.ItemID, action Action, note string) error {
	switch action {
	case Retry, Resume, Skip, Abandon:
	default:
		return fmt.Errorf("%w: %q (want one of %v)", ErrUnknownAction, action, Actions())
	}
	if _, ok := t.story(story); !ok {
		return fmt.Errorf("%w: %s", ErrUnknownStory, story)
	}
	st, err := t.pipe.Get(ctx, story)
	if err != nil {
		return err
	}
	if (action == Retry || action == Resume) && st.Status == pipeline.StatusPaused {
		// Before the decision: once it is recorded, a crash must not leave
		// the refusals in the gate's way again.
		if err := seeRefusals(ctx, t.db, story); err != nil {
			return err
		}
	}
	d := decision{Action: action, Stage: resolveStage(action, st.Stage, len(t.cfg.Flow.Stages)), Note: note, At: t.clk.Now()}
	if st.Pause != nil {
		d.Pause = st.Pause.Key
	}
	if dup, err := teamcore.RecordDecision(ctx, t.db, kindDecision, st, d); err != nil || dup {
		return err
	}
	t.events.add(Event{Kind: EventStoryResolved, At: d.At, Story: story, Stage: d.Stage, Action: action, Detail: note})
	if rs := t.current(); rs != nil {
		effs, err := rs.co.Decided(ctx, story)
		if err != nil {
			return err
		}
		t.carry(rs, effs)
		return nil
	}
	return t.applyDecision(ctx, story)
}

// applyDecision carries a recorded decision to the task graph, if the
// story's task is still parked: released (retry, resume: the next spawn
// applies the decision to the pipeline), completed (skip) or cancelled
// (abandon). Idempotent; Run calls it for parked tasks after a restart.
func (t *Team) applyDecision(ctx context.Context, story foreman.ItemID) error {
	d, err := t.decisionOf(ctx, story)
	if err != nil || d == nil {
		return err
	}
	return teamcore.ApplyDecision(ctx, t.graph, story, d.core(nil))
}

// clearDecision forgets a retry or resume once the pipeline has acted on
// it, so that a later pause can be resolved again.
func (t *Team) clearDecision(ctx context.Context, story foreman.ItemID) error {
	return teamcore.ForgetDecision(ctx, t.db, kindDecision, story)
}

// decisionOf returns the recorded decision about story, or nil.
func (t *Team) decisionOf(ctx context.Context, story foreman.ItemID) (*decision, error) {
	return teamcore.KeptDecisionOf[decision](ctx, t.db, kindDecision, story)
}
