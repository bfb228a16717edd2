package phases_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
)

func readJSON[T any](t *testing.T, path string) T {
	t.Helper()
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	var v T
	require.NoError(t, json.Unmarshal(data, &v))
	return v
}

func TestFilePersister_WritesJSONPerRunAndIteration(t *testing.T) {
	root := t.TempDir()
	p := phases.NewFilePersister(root)
	ctx := context.Background()

	agent := phases.AgentResult{Success: true, SessionID: "s1", Tokens: phases.TokenUsage{Input: 3, Output: 4}, CostUSD: 0.01}
	path, err := p.SaveAgentResult(ctx, "run-1", 1, agent)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "run-1", "iteration-001", "agent.json"), path)
	assert.Equal(t, agent, readJSON[phases.AgentResult](t, path))

	path, err = p.SaveVerificationReport(ctx, "run-1", 1, failReport("FAIL"))
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "run-1", "iteration-001", "verification.json"), path)
	assert.Equal(t, failReport("FAIL"), readJSON[phases.VerificationReport](t, path))

	rec := phases.IterationRecord{Iteration: 2, StartedAt: startTime(), Duration: time.Minute,
		Result: phases.IterationResult{StateTransition: phases.EventBuildFailed, Events: []phases.RunEvent{phases.EventBuildFailed}}}
	path, err = p.SaveIteration(ctx, "run-1", rec)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "run-1", "iteration-002", "iteration.json"), path)
	assert.Equal(t, rec, readJSON[phases.IterationRecord](t, path))

	run := phases.RunResult{ItemID: "item-1", RunID: "run-1", State: phases.StateSucceeded, FinalEvent: phases.EventVerifyPassed,
		States: []phases.RunState{phases.StateQueued, phases.StateSucceeded}}
	path, err = p.SaveRun(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, filepath.Join(root, "run-1", "run.json"), path)
	assert.Equal(t, run, readJSON[phases.RunResult](t, path))

	// Writing again replaces the file; no temporary files are left behind.
	run.State = phases.StateFailed
	_, err = p.SaveRun(ctx, run)
	require.NoError(t, err)
	assert.Equal(t, phases.StateFailed, readJSON[phases.RunResult](t, path).State)
	entries, err := os.ReadDir(filepath.Join(root, "run-1"))
	require.NoError(t, err)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	assert.Equal(t, []string{"iteration-001", "iteration-002", "run.json"}, names)
}

func TestFilePersister_RejectsUnsafeRunIDsAndCancelledContexts(t *testing.T) {
	root := t.TempDir()
	p := phases.NewFilePersister(root)

	_, err := p.SaveRun(context.Background(), phases.RunResult{RunID: "../escape"})
	require.ErrorIs(t, err, foreman.ErrInvalidID)
	_, err = p.SaveAgentResult(context.Background(), "run-1", -1, phases.AgentResult{})
	require.Error(t, err)

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err = p.SaveRun(ctx, phases.RunResult{RunID: "run-1"})
	require.ErrorIs(t, err, context.Canceled)

	entries, err := os.ReadDir(root)
	require.NoError(t, err)
	assert.Empty(t, entries)
}

// The RunLoop with the real FilePersister leaves one file per record.
func TestFilePersister_WithRunLoop(t *testing.T) {
	h := newHarness(t, harnessOptions{}, fails("h1", "o1"), passes("h2"))
	root := t.TempDir()
	h.cfg.Services.ResultPersister = phases.NewFilePersister(root)

	res, err := h.run(context.Background(), phases.Limits{})
	require.NoError(t, err)
	require.Equal(t, phases.StateSucceeded, res.State)

	for _, rel := range []string{"run.json", "iteration-001/agent.json", "iteration-001/verification.json",
		"iteration-001/iteration.json", "iteration-002/agent.json", "iteration-002/verification.json", "iteration-002/iteration.json"} {
		assert.FileExists(t, filepath.Join(root, "run-1", rel))
	}
	saved := readJSON[phases.RunResult](t, filepath.Join(root, "run-1", "run.json"))
	assert.Equal(t, res.States, saved.States)
	assert.Len(t, saved.Iterations, 2)
}
