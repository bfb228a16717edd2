package teamcore

import (
	"context"
	"testing"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/agentforeman/foreman/pipeline/taskgraph"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// conflictStore refuses the next decision write as if another caller
// had written first.
type conflictStore struct {
	store.Store
	conflict bool
}

func (s *conflictStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if s.conflict {
		s.conflict = false
		return nil, store.ErrConflict
	}
	return s.Store.Apply(ctx, ops...)
}

func TestRecordDecision(t *testing.T) {
	const kind = "test.decision"
	paused := func(key string) pipeline.State {
		return pipeline.State{Item: "S1", Status: pipeline.StatusPaused, Pause: &pipeline.Escalation{Key: key}}
	}
	retry := Decision{To: taskgraph.Pending, Stage: 1, Pause: "k1"}
	skip := Decision{To: taskgraph.Completed, Stage: 1, Pause: "k1"}
	tests := []struct {
		name     string
		kept     *Decision
		st       pipeline.State
		conflict bool
		dup      bool
		refused  string // "" when recorded
		want     Decision
	}{
		{name: "recorded", st: paused("k1"), want: retry},
		{name: "not paused", st: pipeline.State{Item: "S1", Status: pipeline.StatusActive}, refused: "S1 is " + pipeline.StatusActive.String()},
		{name: "the same again", kept: &retry, st: paused("k1"), dup: true, want: retry},
		{name: "another about the same pause", kept: &skip, st: paused("k1"), refused: "already resolved", want: skip},
		{name: "kept for an earlier pause", kept: &Decision{To: taskgraph.Completed, Pause: "k0"}, st: paused("k1"), want: retry},
		{name: "at the same time", st: paused("k1"), conflict: true, refused: "at the same time"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			db := &conflictStore{Store: store.NewMemory(store.MemoryOptions{})}
			if tc.kept != nil {
				dup, err := RecordDecision(ctx, db, kind, paused(tc.kept.Pause), *tc.kept)
				require.NoError(t, err)
				require.False(t, dup)
			}
			db.conflict = tc.conflict
			dup, err := RecordDecision(ctx, db, kind, tc.st, retry)
			assert.Equal(t, tc.dup, dup)
			if tc.refused != "" {
				require.ErrorIs(t, err, ErrNotPaused)
				assert.Contains(t, err.Error(), tc.refused)
			} else {
				require.NoError(t, err)
			}
			got, err := KeptDecisionOf[Decision](ctx, db, kind, "S1")
			require.NoError(t, err)
			if tc.want == (Decision{}) {
				assert.Nil(t, got)
				return
			}
			require.NotNil(t, got)
			assert.Equal(t, tc.want, *got)
			require.NoError(t, ForgetDecision(ctx, db, kind, "S1"))
			got, err = KeptDecisionOf[Decision](ctx, db, kind, "S1")
			require.NoError(t, err)
			assert.Nil(t, got, "forgotten")
			require.NoError(t, ForgetDecision(ctx, db, kind, "S1"), "nothing kept is no error")
		})
	}
}
