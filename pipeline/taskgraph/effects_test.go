package taskgraph

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestEffectText(t *testing.T) {
	r := StatusReport{Mode: ModeImplOnly}
	cases := []struct {
		e    Effect
		want string
	}{
		{Effect{Kind: EffectSpawn, Task: "T-1", Role: "tester", Assignment: "T-1.3"}, "[coordinator] Spawn tester worker for T-1 (assignment T-1.3)"},
		{Effect{Kind: EffectLog, Note: NoteUnblocked, Task: "T-1", Role: "tester"}, "[coordinator] Spawning: T-1 → tester"},
		{Effect{Note: NoteSpawned, Task: "T-1", Role: "tester", Assignment: "T-1.3"}, "[coordinator] > Spawned: tester → T-1 (assignment T-1.3)"},
		{Effect{Note: NoteSpawnSummary, Tasks: []string{"A", "B"}, Count: 1, Total: 4}, "[coordinator] 2 agent(s) spawned. Pipeline: 1/4 completed"},
		{Effect{Note: NoteWaiting, Tasks: []string{"A", "B"}}, "[coordinator] Waiting for: A, B"},
		{Effect{Note: NotePipelineComplete, Count: 4, Total: 4}, "PIPELINE_COMPLETE: all pipeline tasks completed (4/4)"},
		{Effect{Note: NoteStalled, Count: 1, Total: 3, Details: &Details{Blocked: []BlockedTask{{Task: "C", Status: Pending, Blockers: []BlockerStatus{{Task: "B", Status: Cancelled}}}}, Missing: []string{"D"}}}, "C blocked by B (cancelled)"},
		{Effect{Note: NoteConfirmed, Task: "A", Role: "planner"}, "[coordinator] done A confirmed complete (planner)"},
		{Effect{Note: NoteProgress, Task: "A", Role: "planner"}, "A progress update from planner"},
		{Effect{Note: NoteStillRunning, Task: "A", Role: "planner"}, "[coordinator] ... A still running (planner)"},
		{Effect{Note: NoteAllRunning, Count: 2}, "2 worker(s) still executing."},
		{Effect{Note: NoteWorkerFailed, Task: "A", Role: "planner", Status: Failed}, "Worker failure: A (planner), task status failed"},
		{Effect{Note: NoteCancelled, Task: "A", Role: "planner"}, "A was cancelled; its worker (planner) is released"},
		{Effect{Note: NoteParked, Task: "A", Role: "planner"}, "[coordinator] A is parked, waiting for a person; its worker (planner) is released"},
		{Effect{Note: NoteOrphanReset, Task: "A"}, "A was in progress with no active worker; reset to pending"},
		{Effect{Note: NoteCheckpoint, Task: "DISCUSS-006"}, "SPEC PHASE COMPLETE — CHECKPOINT (DISCUSS-006)"},
		{Effect{Note: NotePaused, Task: "DISCUSS-006"}, "Paused at checkpoint DISCUSS-006"},
		{Effect{Note: NoteResumed, Task: "DISCUSS-006"}, "Checkpoint DISCUSS-006 released; resuming."},
		{Effect{Note: NoteNoWorker, Role: "analyst"}, "Info: message from [analyst] (no active task tracked)"},
		{Effect{Kind: EffectLog, Note: NoteStale, Role: "tester", Task: "A", Assignment: "A.1"}, `Ignored stale message from [tester] for A (assignment "A.1" is not current)`},
		{Effect{Kind: EffectAck, Note: NoteDuplicate, Role: "tester", Task: "A", Assignment: "A.1"}, "A already processed (duplicate from [tester], assignment A.1)"},
		{Effect{Note: NoteStatus, Details: &Details{Report: &r}}, "Mode: impl-only | Progress: 0/0 (0%)"},
		{Effect{Note: NoteViolations, Details: &Details{Text: "x"}}, "[coordinator] Validation: x"},
		{Effect{Kind: EffectLog, Note: NoteTaskUpdated, Task: "A", Status: Completed}, "[coordinator] A is now completed"},
		{Effect{Note: NoteStatus}, "[coordinator] report status"},
	}
	for _, tc := range cases {
		assert.Contains(t, tc.e.Text(), tc.want, tc.e.Note.String())
	}
	assert.Equal(t, "task_unblocked", Effect{Note: NoteUnblocked}.LogType())
	assert.Equal(t, "error", Effect{Note: NoteWorkerFailed}.LogType())
	assert.Equal(t, "stale", Effect{Note: NoteStale}.LogType())
	assert.Equal(t, "task_cancelled", Effect{Note: NoteTaskUpdated, Status: Cancelled}.LogType())
	assert.Equal(t, "confirmed", Effect{Note: NoteConfirmed}.LogType())
	assert.Equal(t, "spawn/A/A.1", Effect{Kind: EffectSpawn, Task: "A", Assignment: "A.1"}.Key())
	assert.Equal(t, "report/7", Effect{Seq: 7}.Key())
	assert.Equal(t, "Note(99)", Note(99).String())
	assert.Equal(t, "EffectKind(9)", EffectKind(9).String())
}

func TestEffectJSON(t *testing.T) {
	e := Effect{Kind: EffectAck, Note: NoteDuplicate, Status: Completed, Seq: 3, Task: "A", Role: "tester", Assignment: "A.1", Details: &Details{Text: "t"}}
	b, err := json.Marshal(e)
	require.NoError(t, err)
	assert.Contains(t, string(b), `"kind":"ack","note":"duplicate","status":"completed"`)
	var back Effect
	require.NoError(t, json.Unmarshal(b, &back))
	assert.Equal(t, e, back)
	assert.Error(t, json.Unmarshal([]byte(`{"kind":"dance"}`), &back))
	assert.Error(t, json.Unmarshal([]byte(`{"note":"dance"}`), &back))
}

func TestErrorTexts(t *testing.T) {
	errs := []error{
		&CycleError{Cycle: []string{"A", "B"}},
		&UnknownBlockerError{Task: "A", Blocker: "B"},
		&UnknownRoleError{Task: "A", Role: "poet", Known: []string{"tester"}},
		&DuplicateTaskError{Task: "A"},
		&TransitionError{Task: "A", From: Completed, Event: EventStart},
		&CorruptSessionError{ID: "s", Err: errors.New("bad")},
	}
	for _, err := range errs {
		assert.True(t, strings.HasPrefix(err.Error(), "taskgraph: "), err.Error())
	}
	assert.Equal(t, "taskgraph: task A has unknown role \"poet\" (known: tester)", errs[2].Error())
	assert.ErrorIs(t, fmt.Errorf("w: %w", errs[5]), ErrCorruptSession)
	assert.Equal(t, "bad", errors.Unwrap(errs[5]).Error())
	assert.Equal(t, "stale", Stale.String())
	assert.Equal(t, "Handler(?)", Handler(9).String())
}

func TestSessionProgress(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := customSession(t, c, chain()...)
	s, _ = handle(t, c, s, WakeUp{})
	s, _ = complete(t, c, s, "A")
	done, total := s.Progress()
	assert.Equal(t, 1, done)
	assert.Equal(t, 4, total)
}
