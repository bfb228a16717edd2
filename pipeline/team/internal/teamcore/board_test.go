package teamcore

import (
	"context"
	"fmt"
	"testing"

	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// racingStore lets another writer write once, just before the first
// board write it sees.
type racingStore struct {
	store.Store
	other func()
}

func (s *racingStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	if f := s.other; f != nil && ops[0].Kind == KindBoard {
		s.other = nil
		f()
	}
	return s.Store.Apply(ctx, ops...)
}

// The board's two writers, the stage runner recording a verified plan
// (its task count) and the flow setting the story's status, may write at
// once: neither loses the other's field, and neither fails.
func TestTheBoardsWritersKeepEachOthersFields(t *testing.T) {
	ctx := context.Background()
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	mem := store.NewMemory(store.MemoryOptions{})
	b := StoreBoard{DB: &racingStore{Store: mem, other: func() {
		require.NoError(t, StoreBoard{DB: mem}.SetStatus(ctx, "S1", "In Progress"))
	}}}
	require.NoError(t, b.Verified(ctx, flow, "S1", plan(t, 3)))
	got, err := b.Story(ctx, "S1")
	require.NoError(t, err)
	assert.Equal(t, pipeline.BoardStory{Found: true, Status: "In Progress", Tasks: 3}, got)

	b.DB = &racingStore{Store: mem, other: func() {
		require.NoError(t, StoreBoard{DB: mem}.Verified(ctx, flow, "S1", plan(t, 5)))
	}}
	require.NoError(t, b.SetStatus(ctx, "S1", "To Review"))
	got, err = b.Story(ctx, "S1")
	require.NoError(t, err)
	assert.Equal(t, pipeline.BoardStory{Found: true, Status: "To Review", Tasks: 5}, got)
}

// plan is a verified plan stage's report with its task count.
func plan(t *testing.T, tasks int) message.Report {
	t.Helper()
	r, ok := ReportOfLine(0, fmt.Sprintf("Stage 0 COMPLETE for S1. %d tasks created. Plan score: 4/4.", tasks))
	require.True(t, ok)
	return r
}
