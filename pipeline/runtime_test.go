package pipeline_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/pipelinemock"
	"github.com/agentforeman/foreman/pipeline/store"
)

const id foreman.ItemID = "PROJ-7"

type mocks struct {
	spawn *pipelinemock.MockSpawner
	msg   *pipelinemock.MockMessenger
	wt    *pipelinemock.MockWorktrees
	merge *pipelinemock.MockMerger
	board *pipelinemock.MockBoard
	esc   *pipelinemock.MockEscalator
	rep   *pipelinemock.MockReporter
	store store.Store
	cfg   pipeline.RuntimeConfig
}

func newMocks(t *testing.T) *mocks {
	ctrl := gomock.NewController(t)
	m := &mocks{
		spawn: pipelinemock.NewMockSpawner(ctrl), msg: pipelinemock.NewMockMessenger(ctrl),
		wt: pipelinemock.NewMockWorktrees(ctrl), merge: pipelinemock.NewMockMerger(ctrl),
		board: pipelinemock.NewMockBoard(ctrl), esc: pipelinemock.NewMockEscalator(ctrl),
		rep: pipelinemock.NewMockReporter(ctrl), store: store.NewMemory(store.MemoryOptions{}),
	}
	m.cfg = pipeline.RuntimeConfig{Store: m.store, Spawner: m.spawn, Messenger: m.msg, Worktrees: m.wt,
		Merger: m.merge, Board: m.board, Escalator: m.esc, Reporter: m.rep,
		Clock: foreman.NewFakeClock(time.Date(2026, 3, 9, 0, 0, 0, 0, time.UTC))}
	return m
}

func (m *mocks) runtime(t *testing.T) *pipeline.Runtime {
	rt, err := pipeline.NewRuntime(m.cfg)
	require.NoError(t, err)
	return rt
}

func deliver(t *testing.T, rt *pipeline.Runtime, st pipeline.State, line string) (pipeline.State, error) {
	env, _ := message.Open(st.Worker, st.Assignment, line, time.Time{})
	return rt.Deliver(context.Background(), id, env)
}

// started runs Start with its effects expected.
func (m *mocks) started(t *testing.T, rt *pipeline.Runtime) pipeline.State {
	m.wt.EXPECT().CreateWorktree(gomock.Any(), id).Return(nil)
	m.spawn.EXPECT().Spawn(gomock.Any(), gomock.Any()).Return(nil)
	st, err := rt.Start(context.Background(), id, "Title")
	require.NoError(t, err)
	return st
}

func TestRuntimeStartSpawnsTheFirstWorker(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	gomock.InOrder(
		m.wt.EXPECT().CreateWorktree(gomock.Any(), id).Return(nil),
		m.spawn.EXPECT().Spawn(gomock.Any(), pipeline.SpawnRequest{Item: id, Title: "Title", Stage: 0, StageName: "plan",
			Worker: "story-PROJ-7-s0", Assignment: "PROJ-7-a1"}).Return(nil),
	)
	st, err := rt.Start(context.Background(), id, "Title")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusActive, st.Status)
	_, err = rt.Start(context.Background(), id, "Title")
	assert.ErrorIs(t, err, pipeline.ErrInvalidTransition, "started twice")
}

func TestRuntimeKeepsAFailedEffectPendingAndRetriesIt(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	down := errors.New("spawner down")
	m.wt.EXPECT().CreateWorktree(gomock.Any(), id).Return(nil)
	m.spawn.EXPECT().Spawn(gomock.Any(), gomock.Any()).Return(down)
	st, err := rt.Start(context.Background(), id, "Title")
	require.ErrorIs(t, err, down)
	assert.Equal(t, pipeline.StatusActive, st.Status, "the transition stands")
	pending, err := rt.Pending(context.Background(), id)
	require.NoError(t, err)
	require.Len(t, pending, 1)
	assert.Equal(t, pipeline.EffectSpawn, pending[0].Kind)
	assert.Equal(t, "spawn/PROJ-7-a1", pending[0].Key())

	// A new coordinator recovers: only the spawn is re-issued.
	m.spawn.EXPECT().Spawn(gomock.Any(), gomock.Any()).Return(nil)
	require.NoError(t, m.runtime(t).Recover(context.Background()))
	pending, _ = rt.Pending(context.Background(), id)
	assert.Empty(t, pending)
}

func TestRuntimeBoardCheckAndStaleCounting(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	st := m.started(t, rt)

	// A stale sender: nothing read, nothing sent, counted.
	env, _ := message.Open("story-PROJ-7-s9", "PROJ-7-a9", "Stage 0 COMPLETE for PROJ-7. 2 tasks created. Plan score: 3/4.", time.Time{})
	got, err := rt.Deliver(context.Background(), id, env)
	require.NoError(t, err)
	assert.Equal(t, 1, got.Stale)
	assert.Equal(t, int64(1), rt.Stats().Stale)

	// The board shows no tasks: paused, in the seed's order.
	m.board.EXPECT().Story(gomock.Any(), id).Return(pipeline.BoardStory{Found: true, Status: "Backlog"}, nil)
	gomock.InOrder(
		m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, o pipeline.Outgoing) error {
			assert.Equal(t, pipeline.EffectAck, o.Kind)
			assert.Equal(t, "ACK Stage 0 for PROJ-7", o.Text)
			return nil
		}),
		m.wt.EXPECT().RemoveWorktree(gomock.Any(), id).Return(nil),
		m.esc.EXPECT().Escalate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, e pipeline.Escalation) error {
			assert.Equal(t, pipeline.ReasonBoardCheck, e.Reason)
			return nil
		}),
		m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil),
		m.rep.EXPECT().AppendReport(gomock.Any(), gomock.Any()).Return(nil),
	)
	got, err = deliver(t, rt, st, "Stage 0 COMPLETE for PROJ-7. 2 tasks created. Plan score: 3/4.")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusPaused, got.Status)
}

func TestRuntimeUnparseableProbesThenPauses(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	st := m.started(t, rt)
	m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, o pipeline.Outgoing) error {
		assert.Equal(t, pipeline.EffectProbe, o.Kind)
		assert.Equal(t, "Status check: are you still working on Stage 0 for PROJ-7?", o.Text)
		return nil
	})
	got, err := deliver(t, rt, st, "I think I am done?")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusActive, got.Status)

	m.wt.EXPECT().RemoveWorktree(gomock.Any(), id).Return(nil)
	m.esc.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(nil)
	m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil)
	m.rep.EXPECT().AppendReport(gomock.Any(), gomock.Any()).Return(nil)
	got, err = deliver(t, rt, st, "Stage 0 KINDA DONE for PROJ-7")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusPaused, got.Status)
	assert.Equal(t, pipeline.ReasonUnparseable, got.Pause.Reason)

	// A person resolves it: a fresh worker at the stage, told the note.
	m.wt.EXPECT().CreateWorktree(gomock.Any(), id).Return(nil)
	m.spawn.EXPECT().Spawn(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, r pipeline.SpawnRequest) error {
		assert.Equal(t, "answer in the canonical format", r.Feedback)
		assert.Equal(t, foreman.AssignmentID("PROJ-7-a2"), r.Assignment)
		return nil
	})
	got, err = rt.Resolve(context.Background(), id, 0, "answer in the canonical format")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusActive, got.Status)
}

func TestRuntimeMergeConflictPausesNamingFiles(t *testing.T) {
	m := newMocks(t)
	rt := m.runtime(t)
	st := m.started(t, rt)
	m.board.EXPECT().Story(gomock.Any(), id).Return(pipeline.BoardStory{Found: true, Status: "Backlog", Tasks: 2}, nil)
	m.board.EXPECT().Story(gomock.Any(), id).Return(pipeline.BoardStory{Found: true, Status: pipeline.BoardTodo, Tasks: 2}, nil)
	m.board.EXPECT().Story(gomock.Any(), id).Return(pipeline.BoardStory{Found: true, Status: pipeline.BoardToReview, Tasks: 2}, nil)
	m.msg.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	m.spawn.EXPECT().Spawn(gomock.Any(), gomock.Any()).Return(nil).Times(3)
	lines := []string{
		"Stage 0 COMPLETE for PROJ-7. 2 tasks created. Plan score: 3/4.",
		"Stage 1 COMPLETE for PROJ-7. Verdict: GO. Readiness: 7.",
		"Stage 2 COMPLETE for PROJ-7. All tasks Done. Story set to To Review.",
	}
	var err error
	for _, l := range lines {
		st, err = deliver(t, rt, st, l)
		require.NoError(t, err)
	}
	require.Equal(t, 3, st.Stage)
	m.merge.EXPECT().Merge(gomock.Any(), pipeline.MergeRequest{Item: id, Title: "Title"}).
		Return(pipeline.MergeOutcome{Conflict: []string{"a.go"}}, nil)
	m.esc.EXPECT().Escalate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, e pipeline.Escalation) error {
		assert.Equal(t, []string{"a.go"}, e.Files)
		assert.Equal(t, pipeline.ReasonMergeConflict, e.Reason)
		return nil
	})
	m.rep.EXPECT().AppendReport(gomock.Any(), gomock.Any()).Return(nil)
	st, err = deliver(t, rt, st, "Stage 3 COMPLETE for PROJ-7. Verdict: CONCERNS. Quality Score: 80/100.")
	require.NoError(t, err)
	assert.Equal(t, pipeline.StatusPaused, st.Status)
	assert.True(t, st.Worktree, "kept for the person")
}

func TestRuntimeRefusesCorruptRecords(t *testing.T) {
	m := newMocks(t)
	_, err := m.store.Apply(context.Background(), store.Op{Kind: pipeline.RecordKind, ID: string(id), Data: []byte("{")})
	require.NoError(t, err)
	_, err = m.runtime(t).Get(context.Background(), id)
	assert.ErrorIs(t, err, pipeline.ErrCorruptRecord)
	_, err = m.store.Apply(context.Background(), store.Op{Kind: pipeline.RecordKind, ID: "X", Data: []byte(`{"format":99}`)})
	require.NoError(t, err)
	_, err = m.runtime(t).Get(context.Background(), "X")
	assert.ErrorIs(t, err, pipeline.ErrCorruptRecord)
	rec, err := m.store.Get(context.Background(), pipeline.RecordKind, string(id))
	require.NoError(t, err)
	assert.Equal(t, "{", string(rec.Data), "kept as it was")
}

func TestNewRuntimeRequiresServices(t *testing.T) {
	_, err := pipeline.NewRuntime(pipeline.RuntimeConfig{})
	assert.Error(t, err)
	m := newMocks(t)
	m.cfg.Flow = &pipeline.Flow{}
	_, err = pipeline.NewRuntime(m.cfg)
	assert.ErrorIs(t, err, pipeline.ErrInvalidFlow)
}
