package pipeline_test

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/pipelinemock"
	"github.com/agentforeman/foreman/worker"
)

// FileReporter's "Code:" line comes from its DiffStater; an item without
// a branch has none.
func TestFileReporterDiffStatFromDiffStater(t *testing.T) {
	ctx := context.Background()
	ctrl := gomock.NewController(t)
	diff := pipelinemock.NewMockDiffStater(ctrl)
	diff.EXPECT().DiffStat(gomock.Any(), foreman.ItemID("P-1")).Return(merge.DiffStat{Files: 2, Insertions: 10, Deletions: 3}, nil)
	diff.EXPECT().DiffStat(gomock.Any(), foreman.ItemID("P-2")).Return(merge.DiffStat{}, merge.ErrNoBranch)
	fr := &pipeline.FileReporter{Root: t.TempDir(), Diff: diff}
	start := time.Date(2026, 3, 9, 10, 0, 0, 0, time.UTC)
	f := pipeline.StoryFlow(pipeline.StoryConfig{})
	require.NoError(t, fr.AppendReport(ctx, pipeline.ReportEntry{Key: "k1", Flow: f,
		State: pipeline.State{Item: "P-1", Status: pipeline.StatusDone, Started: start}}))
	require.NoError(t, fr.AppendReport(ctx, pipeline.ReportEntry{Key: "k2", Flow: f,
		State: pipeline.State{Item: "P-2", Status: pipeline.StatusPaused, Started: start}}))
	data, err := os.ReadFile(fr.Path(start))
	require.NoError(t, err)
	assert.Equal(t, 1, strings.Count(string(data), "- **Code:**"))
	assert.Contains(t, string(data), "- **Code:** +10 / -3 (2 files)")
}

// The DispatcherSpawner hands the Inbox the agent's report as an envelope
// from the worker on its assignment.
func TestDispatcherSpawnerDeliversTheReportToTheInbox(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ctrl := gomock.NewController(t)
	inbox := pipelinemock.NewMockInbox(ctrl)
	got := make(chan message.Envelope, 1)
	inbox.EXPECT().Deliver(gomock.Any(), foreman.ItemID("P-1"), gomock.Any()).DoAndReturn(
		func(_ context.Context, _ foreman.ItemID, env message.Envelope) (pipeline.State, error) {
			got <- env
			return pipeline.State{}, nil
		})
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true, Result: "Stage 2 COMPLETE for P-1. All tasks Done. Story set to To Review."}, nil
	})
	ds, err := pipeline.NewDispatcherSpawner(pipeline.DispatcherSpawnerConfig{
		Worker: worker.Config{Agent: agent, Commits: worker.NoCommits}, Inbox: inbox,
		Workspace: func(foreman.ItemID) (string, error) { return t.TempDir(), nil }})
	require.NoError(t, err)
	defer ds.Close()
	require.NoError(t, ds.Spawn(ctx, pipeline.SpawnRequest{Item: "P-1", Stage: 2, Worker: "story-P-1-s2", Assignment: "P-1-a3"}))
	select {
	case env := <-got:
		assert.Equal(t, foreman.WorkerID("story-P-1-s2"), env.Sender)
		assert.Equal(t, foreman.AssignmentID("P-1-a3"), env.Assignment)
		assert.Equal(t, message.Stage2Complete{Item: "P-1"}, env.Body)
	case <-ctx.Done():
		t.Fatal("no report")
	}
}
