package team

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/worker"
)

// kindUsage holds what each story's agents spent (usageRecord, by story
// id): kept apart from its memory so that the status reads every story's
// in one List.
const kindUsage = "team.usage"

// usageRecord is what a story's agents have spent, over every stage,
// attempt and run of the host.
type usageRecord struct {
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"costUSD"`
}

// onUsage records what a stage's agent reported spending: as an
// EventUsage at once, and added to the story's total in the store by one
// of the Run's goroutines (the worker pool's effect goroutine, where this
// runs, must not wait for the store).
func (t *Team) onUsage(rs *runState, ev worker.Event) {
	if ev.Usage == (worker.Usage{}) {
		return
	}
	a := foreman.AssignmentID(ev.Item)
	item, ok := t.spawns.itemOf(a)
	if !ok {
		return
	}
	stage := t.spawns.stageOf(a)
	t.events.add(Event{Kind: EventUsage, At: ev.At, Story: item, Stage: stage, Role: t.role(stage), Worker: ev.Worker,
		Assignment: a, Tokens: ev.Usage.Tokens, CostUSD: ev.Usage.CostUSD})
	rs.wg.Add(1)
	go func() {
		defer rs.wg.Done()
		if err := addUsage(rs.ctx, t.db, item, ev.Usage); err != nil {
			t.log.Warn("team: recording what a story's agent spent", "story", item, "err", err)
		}
	}()
}

// addUsage adds u to a story's usage record: a read-modify-write at the
// record's version, done again on a conflict.
func addUsage(ctx context.Context, db store.Store, item foreman.ItemID, u worker.Usage) error {
	for range 5 {
		var r usageRecord
		ver, _, err := getJSON(ctx, db, kindUsage, string(item), &r)
		if err != nil {
			return err
		}
		r.Tokens += u.Tokens
		r.CostUSD += u.CostUSD
		data, err := json.Marshal(r)
		if err != nil {
			return err
		}
		_, err = db.Apply(ctx, store.Op{Kind: kindUsage, ID: string(item), ExpectVersion: ver, Data: data})
		if !errors.Is(err, store.ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("team: adding to the usage of %s: too many conflicts", item)
}

// usageByStory reads every story's usage record.
func usageByStory(ctx context.Context, db store.Store) (map[foreman.ItemID]usageRecord, error) {
	recs, err := db.List(ctx, kindUsage)
	if err != nil {
		return nil, err
	}
	out := make(map[foreman.ItemID]usageRecord, len(recs))
	for _, rec := range recs {
		var r usageRecord
		if err := json.Unmarshal(rec.Data, &r); err != nil {
			return nil, fmt.Errorf("team: corrupt %s record %q: %w", kindUsage, rec.ID, err)
		}
		out[foreman.ItemID(rec.ID)] = r
	}
	return out, nil
}
