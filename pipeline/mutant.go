package pipeline

import (
	"context"
	"fmt"
)

// mergeFirst is the merge-before-persist mutant (internal/mutant; only a
// build with the foreman_mutants tag can reach it): it carries out the
// transition's merges before the transition is persisted, so that a crash
// in between leaves a commit on main for an item the store still holds
// active.
func mergeFirst(ctx context.Context, m Merger, rec record) error {
	for _, e := range rec.Pending {
		if e.Kind != EffectMerge {
			continue
		}
		if _, err := m.Merge(ctx, MergeRequest{Item: e.Item, Title: e.Title}); err != nil {
			return fmt.Errorf("pipeline: %s merge: %w", e.Item, err)
		}
	}
	return nil
}
