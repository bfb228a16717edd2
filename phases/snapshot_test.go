package phases_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/phasesmock"
)

func TestSnapshotPhase_CapturesSnapshot(t *testing.T) {
	ctrl := gomock.NewController(t)
	snapper := phasesmock.NewMockSnapshotter(ctrl)
	clk := foreman.NewFakeClock(startTime())
	want := changedSnapshot("h1")
	snapper.EXPECT().Capture(gomock.Any(), "/work/space", beforeState(),
		phases.SnapshotMeta{RunID: "r1", Iteration: 1, TaskPrompt: "add a feature"}).
		DoAndReturn(func(context.Context, string, phases.BeforeState, phases.SnapshotMeta) (phases.Snapshot, error) {
			clk.Advance(time.Second)
			return want, nil
		})

	res := phases.NewSnapshotPhaseHandler(phases.SnapshotOptions{}).Execute(context.Background(),
		phaseContext(phases.PhaseServices{Snapshotter: snapper, Clock: clk}), phases.SnapshotPhaseInput{BeforeState: beforeState()})

	assert.True(t, res.Success)
	assert.Nil(t, res.Error)
	assert.False(t, res.NoChanges)
	require.NotNil(t, res.Snapshot)
	assert.Equal(t, want, *res.Snapshot)
	assert.Equal(t, time.Second, res.Duration)
}

func TestSnapshotPhase_DetectsGitStateChanges(t *testing.T) {
	tests := []struct {
		name       string
		snapshot   phases.Snapshot
		allowEmpty bool
		success    bool
		noChanges  bool
	}{
		{name: "commits", snapshot: phases.Snapshot{Commits: []phases.Commit{{Hash: "c"}}}, success: true},
		{name: "file diffs", snapshot: phases.Snapshot{Files: []phases.FileDiff{{Path: "a", Status: "A"}}}, success: true},
		{name: "uncommitted changes count", snapshot: phases.Snapshot{Uncommitted: []string{"a"}}, success: true},
		{name: "empty is not success", snapshot: phases.Snapshot{DiffHash: "e"}, success: false, noChanges: true},
		{name: "empty allowed", snapshot: phases.Snapshot{DiffHash: "e"}, allowEmpty: true, success: true, noChanges: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctrl := gomock.NewController(t)
			snapper := phasesmock.NewMockSnapshotter(ctrl)
			snapper.EXPECT().Capture(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(tt.snapshot, nil)

			res := phases.NewSnapshotPhaseHandler(phases.SnapshotOptions{AllowEmpty: tt.allowEmpty}).Execute(
				context.Background(), phaseContext(phases.PhaseServices{Snapshotter: snapper}), phases.SnapshotPhaseInput{})

			assert.Equal(t, tt.success, res.Success)
			assert.Equal(t, tt.noChanges, res.NoChanges)
			require.NotNil(t, res.Snapshot, "the snapshot is kept even when empty")
			if tt.success {
				assert.Nil(t, res.Error)
			} else {
				require.NotNil(t, res.Error)
				assert.Equal(t, phases.ErrorNoChanges, res.Error.Kind)
				assert.Contains(t, res.Error.Message, "no changes detected")
			}
		})
	}
}

func TestSnapshotPhase_FailureReturnsErrorStructure(t *testing.T) {
	ctrl := gomock.NewController(t)
	snapper := phasesmock.NewMockSnapshotter(ctrl)
	gitErr := errors.New("git: not a repository")
	snapper.EXPECT().Capture(gomock.Any(), gomock.Any(), gomock.Any(), gomock.Any()).Return(phases.Snapshot{}, gitErr)

	res := phases.NewSnapshotPhaseHandler(phases.SnapshotOptions{}).Execute(context.Background(),
		phaseContext(phases.PhaseServices{Snapshotter: snapper}), phases.SnapshotPhaseInput{})

	assert.False(t, res.Success)
	assert.Nil(t, res.Snapshot)
	require.NotNil(t, res.Error)
	assert.Equal(t, phases.ErrorSnapshotFailed, res.Error.Kind)
	assert.Equal(t, gitErr.Error(), res.Error.Message)
	assert.ErrorIs(t, res.Error, gitErr)
	assert.Equal(t, map[string]any{"run_id": phases.RunID("r1"), "iteration": 1, "phase": phases.PhaseSnapshot}, res.Error.Details)
}

func TestSnapshotPhase_ValidationFailureIsTypedErrorResult(t *testing.T) {
	res := phases.NewSnapshotPhaseHandler(phases.SnapshotOptions{}).Execute(context.Background(),
		phaseContext(phases.PhaseServices{}), phases.SnapshotPhaseInput{})
	require.NotNil(t, res.Error)
	assert.Equal(t, phases.ErrorValidation, res.Error.Kind)
	var verr *phases.ValidationError
	require.ErrorAs(t, res.Error, &verr)
	assert.Equal(t, []string{"snapshotter is required"}, verr.Problems)
}
