package pipeline_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/store"
)

var writeOldRecord = flag.Bool("write-old-record", false, "write testdata/record-4stage.json from the current code")

// oldRecordPath holds a story's record as the four-stage code wrote it:
// started, planned and validated, its build assigned (the Stage 2 spawn
// still pending).
var oldRecordPath = filepath.Join("testdata", "record-4stage.json")

// TestRecordWrittenByTheFourStageCodeLoads checks that a record written
// before flows of any number of stages (and before typed reports) still
// loads, and that its story finishes on it: its pending spawn is re-issued
// and the build's and quality gate's reports, delivered as the typed
// reports the team now sends, take it to DONE.
func TestRecordWrittenByTheFourStageCodeLoads(t *testing.T) {
	ctx := context.Background()
	const item foreman.ItemID = "OLD-1"
	if *writeOldRecord {
		st := store.NewMemory(store.MemoryOptions{})
		w := newStoryWorld()
		rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: st, Spawner: w, Messenger: w,
			Worktrees: w, Merger: w, Board: w, Escalator: w, Reporter: w,
			Clock: foreman.NewFakeClock(time.Date(2026, 11, 27, 12, 0, 0, 0, time.UTC))})
		require.NoError(t, err)
		state, err := rt.Start(ctx, item, "An old story")
		require.NoError(t, err)
		for _, line := range storyLines[:2] {
			env, err := message.Open(state.Worker, state.Assignment, fmt.Sprintf(line, item), time.Time{})
			require.NoError(t, err)
			state, err = rt.Deliver(ctx, item, env)
			require.NoError(t, err)
		}
		rec, err := st.Get(ctx, pipeline.RecordKind, string(item))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(oldRecordPath, rec.Data, 0o644))
	}
	data, err := os.ReadFile(oldRecordPath)
	require.NoError(t, err)
	st := store.NewMemory(store.MemoryOptions{})
	_, err = st.Apply(ctx, store.Op{Kind: pipeline.RecordKind, ID: string(item), Data: data})
	require.NoError(t, err)
	w := newStoryWorld()
	rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: st, Spawner: w, Messenger: w,
		Worktrees: w, Merger: w, Board: w, Escalator: w, Reporter: w})
	require.NoError(t, err)
	state, err := rt.Get(ctx, item)
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusActive, state.Status)
	assert.Equal(t, 2, state.Stage)
	assert.Equal(t, "GO, 8", state.Stages[1].Result)
	require.NoError(t, rt.Recover(ctx))
	for _, r := range []message.Report{
		{Item: item, Stage: 2, Outcome: message.OutcomeComplete},
		{Item: item, Stage: 3, Outcome: "PASS", Score: 92, HasScore: true},
	} {
		env, err := message.Wrap(state.Worker, state.Assignment, r, time.Time{})
		require.NoError(t, err)
		state, err = rt.Deliver(ctx, item, env)
		require.NoError(t, err)
	}
	assert.Equal(t, pipeline.StatusDone, state.Status)
	assert.Equal(t, "PASS 92/100", state.Stages[3].Result)
}

// TestReportScoreOutOfItsRuleIsUnparseable: a Report line may carry a
// score up to 9999, more than a rule takes (the plan's 0..4); from a
// worker it is a message the stage cannot take, probed like an unparseable
// one, not an error of the runtime's.
func TestReportScoreOutOfItsRuleIsUnparseable(t *testing.T) {
	ctx := context.Background()
	w := newStoryWorld()
	rt, err := pipeline.NewRuntime(pipeline.RuntimeConfig{Store: store.NewMemory(store.MemoryOptions{}), Spawner: w,
		Messenger: w, Worktrees: w, Merger: w, Board: w, Escalator: w, Reporter: w})
	require.NoError(t, err)
	state, err := rt.Start(ctx, "S-1", "")
	require.NoError(t, err)
	env, err := message.Open(state.Worker, state.Assignment, "Stage 0 REPORT for S-1: COMPLETE. Score: 9. Tasks: 2.", time.Time{})
	require.NoError(t, err)
	state, err = rt.Deliver(ctx, "S-1", env)
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusActive, state.Status)
	assert.Equal(t, 1, state.Unparsed, "probed as unparseable")
	env, err = message.Open(state.Worker, state.Assignment, "Stage 0 REPORT for S-1: COMPLETE. Score: 4. Tasks: 2.", time.Time{})
	require.NoError(t, err)
	state, err = rt.Deliver(ctx, "S-1", env)
	require.NoError(t, err)
	assert.Equal(t, 1, state.Stage, "the plan in a Report line advances the story")
	assert.Equal(t, "2 tasks, 4/4", state.Stages[0].Result)
}
