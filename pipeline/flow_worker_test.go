package pipeline_test

import (
	"context"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
)

// customFlow is a two-stage flow that leaves Worker and CrashWorker empty,
// as a user who trusts Flow's documented defaults writes it.
func customFlow() *pipeline.Flow {
	return &pipeline.Flow{Name: "custom", CrashBudget: 1, Stages: []pipeline.StageSpec{
		{Name: "build", Rules: []pipeline.Rule{{Outcome: pipeline.Complete, Action: pipeline.Advance}}},
		{Name: "gate", Rules: []pipeline.Rule{{Outcome: pipeline.Pass, Action: pipeline.MergeDone}}},
	}}
}

func TestNewRuntimeFillsTheDefaultWorkerNames(t *testing.T) {
	m := newMocks(t)
	f := customFlow()
	m.cfg.Flow = f
	rt := m.runtime(t)
	assert.Equal(t, pipeline.DefaultWorker, rt.Flow().Worker)
	assert.Equal(t, pipeline.DefaultCrashWorker, rt.Flow().CrashWorker)
	assert.Empty(t, f.Worker, "the caller's flow is not changed")
	m.wt.EXPECT().CreateWorktree(gomock.Any(), id).Return(nil)
	m.spawn.EXPECT().Spawn(gomock.Any(), pipeline.SpawnRequest{Item: id, Title: "Title", Stage: 0, StageName: "build",
		Worker: "story-PROJ-7-s0", Assignment: "PROJ-7-a1"}).Return(nil)
	st, err := rt.Start(context.Background(), id, "Title")
	require.NoError(t, err)
	assert.Equal(t, "story-PROJ-7-s0", string(st.Worker))
	require.NoError(t, st.Worker.Validate())
}

func TestFlowWithDefaultsCrashWorker(t *testing.T) {
	f := customFlow().WithDefaults()
	now := time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)
	s, _, err := f.Step(pipeline.State{Item: id}, pipeline.Event{Kind: pipeline.EventStart}, now)
	require.NoError(t, err)
	for i, k := range []pipeline.EventKind{pipeline.EventIdle, pipeline.EventProbeTimeout} {
		s, _, err = f.Step(s, pipeline.Event{Kind: k, Worker: s.Worker, Assignment: s.Assignment}, now.Add(time.Duration(i+1)*time.Hour))
		require.NoError(t, err)
	}
	assert.Equal(t, "story-PROJ-7-s0-retry", string(s.Worker), "the crashed worker's replacement")
	same := pipeline.StoryFlow(pipeline.StoryConfig{})
	assert.Same(t, same, same.WithDefaults(), "a flow with its names is not copied")
}

func TestFlowValidateWorkerNames(t *testing.T) {
	for _, tc := range []struct {
		name  string
		edit  func(*pipeline.Flow)
		stage int
		field string
	}{
		{"empty names are the defaults", func(*pipeline.Flow) {}, -2, ""},
		{"a plain name", func(f *pipeline.Flow) { f.Worker = "w-{id}-{stage}" }, -2, ""},
		{"a space", func(f *pipeline.Flow) { f.Worker = "worker {id}" }, 0, "Flow.Worker"},
		{"report text", func(f *pipeline.Flow) { f.CrashWorker = "{id}-{detail}" }, 0, "Flow.CrashWorker"},
		{"{times} has a space", func(f *pipeline.Flow) { f.Worker = "{id}-{times}" }, 0, "Flow.Worker"},
		{"ends in .lock", func(f *pipeline.Flow) { f.Worker = "{id}.lock" }, 0, "Flow.Worker"},
		{"starts with -", func(f *pipeline.Flow) { f.Worker = "-{id}" }, 0, "Flow.Worker"},
		{"a rule's worker", func(f *pipeline.Flow) { f.Stages[1].Rules[0].Worker = "fix {n}" }, 1, "Rules[0].Worker"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := customFlow()
			tc.edit(f)
			err := f.Validate()
			if tc.stage == -2 {
				require.NoError(t, err)
				return
			}
			require.ErrorIs(t, err, pipeline.ErrInvalidFlow)
			var fe *pipeline.FlowError
			require.ErrorAs(t, err, &fe)
			assert.Equal(t, tc.stage, fe.Stage)
			assert.Equal(t, tc.field, fe.Field)
			assert.Equal(t, f.Stages[tc.stage].Name, fe.Name)
			assert.Contains(t, err.Error(), "stage "+string(rune('0'+tc.stage))+" ("+fe.Name+")")
		})
	}
}
