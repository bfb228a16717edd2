package taskgraph

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	foreman "github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/store"
)

func newRuntime(t *testing.T, st store.Store, sp Spawner, rep Reporter, clk foreman.Clock) *Runtime {
	t.Helper()
	rt, err := NewRuntime(Config{Store: st, Spawner: sp, Reporter: rep, Clock: clk})
	require.NoError(t, err)
	return rt
}

func stored(t *testing.T, st store.Store, id string) *Session {
	t.Helper()
	rt, err := NewRuntime(Config{Store: st, Spawner: SpawnerFunc(func(context.Context, SpawnRequest) error { return nil })})
	require.NoError(t, err)
	s, _, err := rt.Load(context.Background(), id)
	require.NoError(t, err)
	return s
}

// TestOneStepPerInvocation runs a whole impl-only pipeline the way the
// seed's coordinator runs: every wake-up is a fresh Runtime over the same
// store, which loads, handles one wake-up, saves, acts and stops.
func TestOneStepPerInvocation(t *testing.T) {
	ctx := context.Background()
	st := newMemory()
	sp := &recordingSpawner{}
	clk := foreman.NewFakeClock(t0)
	invoke := func() *Runtime { return newRuntime(t, st, sp, nil, clk) }

	_, err := invoke().Create(ctx, "s1", "team", ModeImplOnly, nil)
	require.NoError(t, err)
	res, err := invoke().StepText(ctx, "s1", "start the pipeline")
	require.NoError(t, err)
	assert.Equal(t, []string{"PLAN-001"}, res.Spawned)

	// Each worker marks its task completed and calls back with its tag.
	finish := func(req SpawnRequest) Result {
		_, err := invoke().Update(ctx, "s1", TaskUpdate{Task: req.Task, To: Completed, Assignment: req.Assignment})
		require.NoError(t, err)
		res, err := invoke().StepText(ctx, "s1", "["+req.Role+"] "+req.Task+" completed")
		require.NoError(t, err)
		return res
	}
	clk.Advance(10 * 60e9)
	res = finish(sp.calls[0])
	assert.Equal(t, []string{"IMPL-001"}, res.Spawned)
	res = finish(sp.calls[1])
	assert.Equal(t, []string{"TEST-001", "REVIEW-001"}, res.Spawned)

	report, err := invoke().Status(ctx, "s1")
	require.NoError(t, err)
	assert.Equal(t, 2, report.Completed)
	res, err = invoke().StepText(ctx, "s1", "check")
	require.NoError(t, err)
	assert.False(t, res.Changed)

	res = finish(sp.calls[2])
	assert.Equal(t, StepWaiting, res.Outcome)
	res = finish(sp.calls[3])
	assert.Equal(t, StepComplete, res.Outcome)

	s := stored(t, st, "s1")
	assert.Equal(t, SessionCompleted, s.Status)
	assert.Empty(t, s.Pending, "every effect was carried out and recorded")
	assert.Empty(t, s.ActiveWorkers)
	assert.Len(t, sp.calls, 4)
	assert.Equal(t, 4, sp.distinct())
	assert.Equal(t, "team", sp.calls[0].Team)
	assert.Contains(t, sp.calls[0].Prompt, "Task: PLAN-001 - Multi-angle")
	assert.Contains(t, sp.calls[0].Prompt, "[planner]")
	assert.Equal(t, t0.Add(10*60e9), s.CompletedAt)
}

// failingStore fails the Apply calls for which fail returns true.
type failingStore struct {
	store.Store
	calls atomic.Int64
	fail  func(n int64, ops []store.Op) error
}

func (f *failingStore) Apply(ctx context.Context, ops ...store.Op) ([]store.Record, error) {
	n := f.calls.Add(1)
	if f.fail != nil {
		if err := f.fail(n, ops); err != nil {
			return nil, err
		}
	}
	return f.Store.Apply(ctx, ops...)
}

var errDown = errors.New("down")

func TestRestartReissuesPendingEffects(t *testing.T) {
	ctx := context.Background()
	st := newMemory()
	_, err := newRuntime(t, st, &recordingSpawner{}, nil, nil).Create(ctx, "s1", "", ModeFullstack, nil)
	require.NoError(t, err)

	// The spawner is down: the step saved its decision, then failed to act.
	down := &recordingSpawner{fail: errDown}
	_, err = newRuntime(t, st, down, nil, nil).Step(ctx, "s1", WakeUp{})
	require.ErrorIs(t, err, errDown)
	s := stored(t, st, "s1")
	assert.Equal(t, InProgress, status(t, s, "PLAN-001"), "persisted before acting")
	require.NotEmpty(t, s.Pending)
	assert.Equal(t, EffectSpawn, s.Pending[0].Kind, "the log before the spawn was carried out and removed")

	// The next invocation re-issues the spawn before handling its own
	// wake-up, and does not decide it again.
	sp := &recordingSpawner{}
	require.NoError(t, newRuntime(t, st, sp, nil, nil).Recover(ctx, "s1"))
	require.Len(t, sp.calls, 1)
	assert.Equal(t, "PLAN-001", sp.calls[0].Task)
	assert.Equal(t, down.calls[0].Assignment, sp.calls[0].Assignment)
	assert.Empty(t, stored(t, st, "s1").Pending)
	res, err := newRuntime(t, st, sp, nil, nil).Step(ctx, "s1", WakeUp{})
	require.NoError(t, err)
	assert.Equal(t, StepWaiting, res.Outcome)
	assert.Len(t, sp.calls, 1)
}

func TestCrashAfterSpawnBeforeRecordingIt(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	_, err := newRuntime(t, mem, &recordingSpawner{}, nil, nil).Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)
	// Apply #1 saves the step, #2 would record the log and the spawn done:
	// the "process" dies there.
	fs := &failingStore{Store: mem, fail: func(n int64, _ []store.Op) error {
		if n == 2 {
			return errDown
		}
		return nil
	}}
	sp := &recordingSpawner{}
	_, err = newRuntime(t, fs, sp, nil, nil).Step(ctx, "s1", WakeUp{})
	require.ErrorIs(t, err, errDown)
	require.Len(t, sp.calls, 1)

	_, err = newRuntime(t, mem, sp, nil, nil).Step(ctx, "s1", WakeUp{Handler: HandleCheck})
	require.NoError(t, err)
	assert.Len(t, sp.calls, 2, "the spawn is re-issued")
	assert.Equal(t, 1, sp.distinct(), "under the same assignment, so the spawner does not start a second worker")
	assert.Empty(t, stored(t, mem, "s1").Pending)
}

func TestConcurrentChangeIsRetried(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	sp := &recordingSpawner{}
	other := newRuntime(t, mem, sp, nil, nil)
	_, err := other.Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)
	_, err = other.Step(ctx, "s1", WakeUp{})
	require.NoError(t, err)
	plan := sp.calls[0]

	// Just before this runtime saves its step, another process records
	// PLAN-001's completion: the save conflicts and the step is redone
	// over the new state.
	var once atomic.Bool
	fs := &failingStore{Store: mem, fail: func(int64, []store.Op) error {
		if once.CompareAndSwap(false, true) {
			_, err := other.Update(ctx, "s1", TaskUpdate{Task: "PLAN-001", To: Completed, Assignment: plan.Assignment})
			require.NoError(t, err)
		}
		return nil
	}}
	res, err := newRuntime(t, fs, sp, nil, nil).Step(ctx, "s1", WakeUp{Handler: HandleResume})
	require.NoError(t, err)
	assert.Equal(t, []string{"PLAN-001"}, res.Completed, "the retry saw the completion")
	assert.Equal(t, []string{"IMPL-001"}, res.Spawned)
	assert.Equal(t, []string{"PLAN-001", "IMPL-001"}, []string{sp.calls[0].Task, sp.calls[1].Task})
}

func TestRuntimeErrors(t *testing.T) {
	ctx := context.Background()
	_, err := NewRuntime(Config{Spawner: &recordingSpawner{}})
	assert.ErrorIs(t, err, ErrNoStore)
	_, err = NewRuntime(Config{Store: newMemory()})
	assert.ErrorIs(t, err, ErrNoSpawner)

	mem := newMemory()
	rt := newRuntime(t, mem, &recordingSpawner{}, nil, nil)
	_, err = rt.Step(ctx, "nope", WakeUp{})
	assert.ErrorIs(t, err, ErrSessionNotFound)
	_, err = rt.Status(ctx, "nope")
	assert.ErrorIs(t, err, ErrSessionNotFound)

	_, err = rt.Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)
	_, err = rt.Create(ctx, "s1", "", ModeImplOnly, nil)
	assert.ErrorIs(t, err, ErrSessionExists)
	_, err = rt.Create(ctx, "s2", "", "custom", nil)
	assert.ErrorIs(t, err, ErrUnknownMode)

	_, err = rt.Step(ctx, "s1", WakeUp{Handler: HandleCallback})
	assert.ErrorIs(t, err, ErrInvalidWakeUp)
	_, err = rt.Update(ctx, "s1", TaskUpdate{Task: "PLAN-001", To: Completed, Assignment: "x"})
	require.NoError(t, err, "a stale update is an outcome, not an error")
	_, err = rt.Update(ctx, "s1", TaskUpdate{Task: "PLAN-001", To: InProgress})
	assert.ErrorIs(t, err, ErrInvalidUpdate)

	cancelled, cancel := context.WithCancel(ctx)
	cancel()
	_, err = rt.Step(cancelled, "s1", WakeUp{})
	assert.ErrorIs(t, err, context.Canceled)

	require.NoError(t, rt.AddTasks(ctx, "s1", spec("DOCS-001", "writer", "REVIEW-001")))
	assert.Equal(t, 5, stored(t, mem, "s1").Graph.Len())
	assert.ErrorIs(t, rt.AddTasks(ctx, "s1", spec("X", "writer", "Y")), ErrUnknownBlocker)

	rep := ReporterFunc(func(context.Context, string, Effect) error { return errDown })
	_, err = newRuntime(t, mem, &recordingSpawner{}, rep, nil).Step(ctx, "s1", WakeUp{Handler: HandleCheck})
	assert.ErrorIs(t, err, errDown)
}

func TestCorruptSessionIsKept(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	for id, data := range map[string]string{
		"garbage": "{not json",
		"cycle":   `{"session_id":"cycle","mode":"custom","status":"active","tasks":[{"subject":"A","owner":"tester","blockedBy":["A"],"status":"pending"}]}`,
		"status":  `{"session_id":"status","mode":"custom","status":"sleeping","tasks":[]}`,
		"other":   `{"session_id":"someone-else","mode":"custom","status":"active","tasks":[]}`,
	} {
		_, err := mem.Apply(ctx, store.Op{Kind: RecordKind, ID: id, Data: []byte(data)})
		require.NoError(t, err)
		rt := newRuntime(t, mem, &recordingSpawner{}, nil, nil)
		_, err = rt.Step(ctx, id, WakeUp{})
		var ce *CorruptSessionError
		require.ErrorAs(t, err, &ce, id)
		assert.ErrorIs(t, err, ErrCorruptSession)
		rec, err := mem.Get(ctx, RecordKind, id)
		require.NoError(t, err)
		assert.Equal(t, data, string(rec.Data), "left as it was")
		assert.Equal(t, int64(1), rec.Version)
	}
}

func TestSessionJSONRoundTrip(t *testing.T) {
	c := NewCore(CoreConfig{})
	s := newSession(t, c, ModeFullstack)
	s, _ = handle(t, c, s, WakeUp{})
	s, _ = complete(t, c, s, "PLAN-001")
	s.Counters = Counters{Stale: 2, Duplicate: 1}
	data, err := s.MarshalJSON()
	require.NoError(t, err)
	back, err := DecodeSession("s1", data)
	require.NoError(t, err)
	assert.Equal(t, s.Graph.Tasks(), back.Graph.Tasks())
	assert.Equal(t, s.ActiveWorkers, back.ActiveWorkers)
	assert.Equal(t, s.Pending, back.Pending)
	assert.Equal(t, s.Counters, back.Counters)
	assert.Equal(t, s.Seq, back.Seq)
	for _, key := range []string{`"session_id":"s1"`, `"tasks_total":6`, `"tasks_completed":1`, `"active_workers":[{"task_subject":"IMPL-001","role":"executor"`} {
		assert.Contains(t, string(data), key)
	}
}

// A session changed by another process while effects are being recorded
// as done: the runtime reloads and records them on the new version.
func TestMarkDoneSurvivesConcurrentChange(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	sp := &recordingSpawner{}
	other := newRuntime(t, mem, sp, nil, nil)
	_, err := other.Create(ctx, "s1", "", ModeImplOnly, nil)
	require.NoError(t, err)
	var once atomic.Bool
	fs := &failingStore{Store: mem, fail: func(n int64, _ []store.Op) error {
		// Apply #2 is the first "effect done": before it, another process
		// cancels REVIEW-001.
		if n == 2 && once.CompareAndSwap(false, true) {
			_, err := other.Update(ctx, "s1", TaskUpdate{Task: "REVIEW-001", To: Cancelled})
			require.NoError(t, err)
		}
		return nil
	}}
	res, err := newRuntime(t, fs, sp, nil, nil).Step(ctx, "s1", WakeUp{})
	require.NoError(t, err)
	assert.Equal(t, []string{"PLAN-001"}, res.Spawned)
	s := stored(t, mem, "s1")
	assert.Empty(t, s.Pending, "every effect recorded done despite the conflict")
	assert.Equal(t, Cancelled, status(t, s, "REVIEW-001"), "and the other process's change is kept")
	assert.Equal(t, 1, sp.distinct())
}

// TestStepWritesTwiceWhateverItsEffects checks that a step is two writes,
// its decision and then its effects recorded done together, however many
// effects it has: here two spawns and their logs and report.
func TestStepWritesTwiceWhateverItsEffects(t *testing.T) {
	ctx := context.Background()
	mem := newMemory()
	_, err := newRuntime(t, mem, &recordingSpawner{}, nil, nil).Create(ctx, "s1", "", ModeImplOnly,
		[]TaskSpec{spec("A", "executor"), spec("B", "executor")})
	require.NoError(t, err)
	fs := &failingStore{Store: mem}
	sp := &recordingSpawner{}
	res, err := newRuntime(t, fs, sp, nil, nil).Step(ctx, "s1", WakeUp{})
	require.NoError(t, err)
	require.ElementsMatch(t, []string{"A", "B"}, res.Spawned)
	require.Greater(t, len(res.Effects), 2)
	assert.Equal(t, int64(2), fs.calls.Load(), "writes for %d effects", len(res.Effects))
	assert.Empty(t, stored(t, mem, "s1").Pending)
}
