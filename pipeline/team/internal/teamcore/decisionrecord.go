package teamcore

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
)

// ErrNotPaused is matched when a decision is recorded about a story that
// is not waiting for a person (it runs, merged, or was resolved
// otherwise); the team's ErrNotPaused is this error.
var ErrNotPaused = errors.New("team: story is not paused")

// KeptDecision is a person's decision as its keeper stores it (the team's
// record of Resolve, the simulator's person): what RecordDecision needs to
// know about a decision already kept.
type KeptDecision interface {
	// PauseKey is the key of the pause decided about ("" for any).
	PauseKey() string
	// ActionName tells the same decision made again (a double click) from
	// another one.
	ActionName() string
}

// PauseKey implements KeptDecision.
func (d Decision) PauseKey() string { return d.Pause }

// ActionName implements KeptDecision: what the parked task becomes and
// the stage a restart starts from.
func (d Decision) ActionName() string { return fmt.Sprintf("%s at stage %d", d.To, d.Stage) }

// aboutPause reports whether a decision kept with pause key decides the
// pause the story is in (Decision.About).
func aboutPause(key string, st pipeline.State) bool {
	return Decision{Pause: key}.About(st)
}

// RecordDecision validates and stores a person's decision d about the
// story st is the state of, under the store kind: the story must be
// paused, and a decision already kept about the same pause is either the
// same one again (dup: nothing changes) or refused; one recorded by
// another caller at the same time is refused too. Each refusal matches
// ErrNotPaused and says why.
func RecordDecision[D KeptDecision](ctx context.Context, db store.Store, kind string, st pipeline.State, d D) (dup bool, err error) {
	if st.Status != pipeline.StatusPaused {
		return false, fmt.Errorf("%w: %s is %s", ErrNotPaused, st.Item, st.Status)
	}
	var prev D
	ver, err := GetRecord(ctx, db, kind, string(st.Item), &prev)
	if err != nil {
		return false, err
	}
	if ver != 0 && aboutPause(prev.PauseKey(), st) {
		if prev.ActionName() == d.ActionName() {
			return true, nil // a double click
		}
		return false, fmt.Errorf("%w: %s was already resolved (%s)", ErrNotPaused, st.Item, prev.ActionName())
	}
	data, err := json.Marshal(d)
	if err != nil {
		return false, err
	}
	if _, err := db.Apply(ctx, store.Op{Kind: kind, ID: string(st.Item), ExpectVersion: ver, Data: data}); err != nil {
		if errors.Is(err, store.ErrConflict) {
			return false, fmt.Errorf("%w: %s was resolved at the same time", ErrNotPaused, st.Item)
		}
		return false, err
	}
	return false, nil
}

// KeptDecisionOf returns the decision kept about item under kind, or nil.
func KeptDecisionOf[D any](ctx context.Context, db store.Store, kind string, item foreman.ItemID) (*D, error) {
	var d D
	ver, err := GetRecord(ctx, db, kind, string(item), &d)
	if err != nil || ver == 0 {
		return nil, err
	}
	return &d, nil
}

// ForgetDecision deletes the decision kept about item under kind, once
// the flow has acted on a retry or resume, so that a later pause can be
// decided again. Nothing kept is no error.
func ForgetDecision(ctx context.Context, db store.Store, kind string, item foreman.ItemID) error {
	rec, err := db.Get(ctx, kind, string(item))
	if errors.Is(err, store.ErrNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	_, err = db.Apply(ctx, store.Op{Kind: kind, ID: string(item), ExpectVersion: rec.Version, Delete: true})
	return err
}
