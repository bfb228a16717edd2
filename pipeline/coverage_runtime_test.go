package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
)

// A line from the current worker that is no worker report (here the
// coordinator's own ACK, echoed) changes nothing and calls no service: the
// mocks fail on any call.
func TestDeliverIgnoresALineThatIsNoWorkerReport(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	st := m.started(t, rt)
	for _, line := range []string{"ACK Stage 0 for PROJ-7", "Execute Stage 0 for PROJ-7", "Pipeline complete for PROJ-7. Shutting down."} {
		got, err := deliver(t, rt, st, line)
		require.NoError(t, err, line)
		assert.Equal(t, st, got, line)
	}
	assert.Equal(t, pipeline.Stats{Transitions: 1, Effects: 2}, rt.Stats())
}

// A report naming another item, even from the item's current worker and
// assignment, cannot be about this item's stage: it is stale, counted, and
// no board is read.
func TestDeliverOfAReportAboutAnotherItemIsStale(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	st := m.started(t, rt)
	got, err := deliver(t, rt, st, "Stage 0 COMPLETE for OTHER-1. 3 tasks created. Plan score: 4/4.")
	require.NoError(t, err)
	assert.Equal(t, 1, got.Stale)
	assert.Equal(t, 0, got.Stage)
	assert.Equal(t, pipeline.StatusActive, got.Status)
	assert.Equal(t, int64(1), rt.Stats().Stale)
}

// A well-formed report that the stage has no rule for is handled as an
// unparseable message: the worker is probed (the second would pause).
func TestDeliverOfAReportWithoutARuleIsUnparseable(t *testing.T) {
	m := newMocks(t)
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	plan := flow.Stages[0].Rules[:0:0]
	for _, r := range flow.Stages[0].Rules {
		if r.Outcome != pipeline.Error {
			plan = append(plan, r)
		}
	}
	flow.Stages[0].Rules = plan // the plan stage knows COMPLETE only
	m.cfg.Flow = flow
	rt := m.runtime(t)
	assert.Same(t, flow, rt.Flow())
	st := m.started(t, rt)

	m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, o pipeline.Outgoing) error {
		assert.Equal(t, pipeline.EffectProbe, o.Kind)
		assert.Equal(t, st.Worker, o.Worker)
		return nil
	})
	got, err := deliver(t, rt, st, "Stage 0 ERROR for PROJ-7: cannot read the story")
	require.NoError(t, err)
	assert.Equal(t, 1, got.Unparsed)
	assert.Equal(t, pipeline.StatusActive, got.Status)
}

// Without a Flow the runtime runs the story flow.
func TestRuntimeFlowDefaultsToTheStoryFlow(t *testing.T) {
	m := newMocks(t)
	assert.Equal(t, "story", m.runtime(t).Flow().Name)
	m.cfg.Flow = pipeline.TaskFlow(pipeline.StoryConfig{})
	assert.Equal(t, "task", m.runtime(t).Flow().Name)
}

// EscalatorFunc hands the escalation to its function and returns its error.
func TestEscalatorFuncCallsTheFunction(t *testing.T) {
	refused := errors.New("pager down")
	var got pipeline.Escalation
	f := pipeline.EscalatorFunc(func(_ context.Context, e pipeline.Escalation) error {
		got = e
		return refused
	})
	e := pipeline.Escalation{Item: id, Reason: pipeline.ReasonCrashed, At: time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC)}
	assert.ErrorIs(t, f.Escalate(context.Background(), e), refused)
	assert.Equal(t, e, got)
}
