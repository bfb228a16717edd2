package health_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/health/healthmock"
)

var start = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

const okReply = "Status for PROJ-42: Stage 2 EXECUTING. Current step: running tests."

type fixture struct {
	clk         *foreman.FakeClock
	prober      *healthmock.MockProber
	items       *healthmock.MockItemChecker
	escalator   *healthmock.MockEscalator
	resumer     *healthmock.MockResumer
	checkpoints *healthmock.MockCheckpointLoader
	markers     *healthmock.MockDoneMarkers
	completer   *healthmock.MockCompleter
	transitions []health.Transition
	m           *health.Monitor
}

func newFixture(t *testing.T, edit func(*fixture, *health.MonitorConfig)) *fixture {
	t.Helper()
	ctrl := gomock.NewController(t)
	f := &fixture{
		clk:         foreman.NewFakeClock(start),
		prober:      healthmock.NewMockProber(ctrl),
		items:       healthmock.NewMockItemChecker(ctrl),
		escalator:   healthmock.NewMockEscalator(ctrl),
		resumer:     healthmock.NewMockResumer(ctrl),
		checkpoints: healthmock.NewMockCheckpointLoader(ctrl),
		markers:     healthmock.NewMockDoneMarkers(ctrl),
		completer:   healthmock.NewMockCompleter(ctrl),
	}
	cfg := health.MonitorConfig{
		Clock: f.clk, Prober: f.prober, ItemChecker: f.items, Escalator: f.escalator,
		Resumer: f.resumer, Checkpoints: f.checkpoints,
		OnTransition: func(tr health.Transition) { f.transitions = append(f.transitions, tr) },
	}
	if edit != nil {
		edit(f, &cfg)
	}
	m, err := health.NewMonitor(cfg)
	require.NoError(t, err)
	t.Cleanup(func() { _ = m.Close() })
	f.m = m
	require.NoError(t, m.Watch(health.Subject{Item: "PROJ-42", Stage: 2, Assignment: "a1", Worker: "w1"}))
	return f
}

func (f *fixture) expectProbe(assignment foreman.AssignmentID, err error) {
	f.prober.EXPECT().Probe(gomock.Any(), health.Probe{Item: "PROJ-42", Stage: 2, Assignment: assignment, Worker: "w1",
		Text: "Status check: are you still working on Stage 2 for PROJ-42?"}).Return(err)
}

// crash drives a1 from Working to a confirmed crash: idle, probe, idle again.
func (f *fixture) crash(t *testing.T, a foreman.AssignmentID) health.Outcome {
	t.Helper()
	ctx := context.Background()
	out, err := f.m.Idle(ctx, a)
	require.NoError(t, err)
	require.Equal(t, health.Probing, out.State.Phase)
	out, err = f.m.Idle(ctx, a)
	require.NoError(t, err)
	return out
}

func checkpointWith(session string) health.Checkpoint {
	return health.Checkpoint{Version: 1, Item: "PROJ-42", Stage: 2, Assignment: "a1", AgentSession: session,
		TasksCompleted: []string{"T1"}, TasksRemaining: []string{"T2"}, LastAction: "did T1"}
}

func TestMonitorParseableReplyClearsSuspicion(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.expectProbe("a1", nil)
	out, err := f.m.Idle(ctx, "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Probing, out.State.Phase)
	assert.Equal(t, 1, out.State.Probes)
	assert.Equal(t, 1, f.clk.Pending(), "probe timer armed")

	out, err = f.m.Reply(ctx, "a1", "Sure!\n"+okReply)
	require.NoError(t, err)
	assert.Equal(t, health.Working, out.State.Phase)
	assert.Zero(t, f.clk.Pending(), "probe timer cancelled")
	f.clk.Advance(time.Hour)
	st, ok := f.m.State("PROJ-42")
	require.True(t, ok)
	assert.Equal(t, health.Working, st.Phase)
	assert.Zero(t, st.Crashes)
}

func TestMonitorUnparseableReplyChangesNothing(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.expectProbe("a1", nil)
	_, err := f.m.Idle(ctx, "a1")
	require.NoError(t, err)
	for _, text := range []string{"I'm fine", "Status for PROJ-7: Stage 2 EXECUTING. Current step: x.",
		"Status for PROJ-42: Stage 1 WAITING. Current step: x.", "Status for ../x: Stage 2 ERROR. Current step: x."} {
		out, err := f.m.Reply(ctx, "a1", text)
		require.ErrorIs(t, err, health.ErrUnparseableReply, text)
		var re *health.ReplyError
		require.True(t, errors.As(err, &re))
		assert.Equal(t, health.Probing, out.State.Phase)
	}
}

func TestMonitorSecondIdleConfirmsCrashAndResumesOwnSession(t *testing.T) {
	f := newFixture(t, nil)
	cp := checkpointWith("sess-1")
	gomock.InOrder(
		f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil),
		f.items.EXPECT().ItemOpen(gomock.Any(), foreman.ItemID("PROJ-42")).Return(true, nil),
		f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), foreman.ItemID("PROJ-42")).Return(cp, nil),
		f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, p health.ResumePlan) (health.Resumed, error) {
			assert.Equal(t, health.ResumeSession, p.Mode)
			assert.Equal(t, "sess-1", p.Session)
			assert.Equal(t, foreman.AssignmentID("a1"), p.PreviousAssignment)
			assert.Equal(t, 1, p.Crashes)
			return health.Resumed{Assignment: "a2", Worker: "w1"}, nil
		}),
	)
	out := f.crash(t, "a1")
	assert.Equal(t, health.Working, out.State.Phase)
	assert.Equal(t, 1, out.State.Crashes)
	assert.Equal(t, foreman.AssignmentID("a2"), out.Assignment)
	require.NotNil(t, out.Resumed)
	assert.Equal(t, health.ResumeSession, out.Resumed.Mode)
	assert.Zero(t, f.clk.Pending())

	_, err := f.m.Idle(context.Background(), "a1")
	assert.ErrorIs(t, err, health.ErrStaleAssignment, "the crashed assignment is fenced off")

	var phases []health.Phase
	for _, tr := range f.transitions {
		phases = append(phases, tr.To.Phase)
	}
	assert.Equal(t, []health.Phase{health.Suspicious, health.Probing, health.CheckingItem, health.Resuming, health.Working}, phases)
}

func TestMonitorResumeFreshWorkerWithCheckpointBlock(t *testing.T) {
	tests := []struct {
		name       string
		cp         health.Checkpoint
		cpErr      error
		sessionErr bool
		wantPrompt bool
	}{
		{"checkpoint without session", checkpointWith(""), nil, false, true},
		{"session resume fails", checkpointWith("sess-1"), nil, true, true},
		{"no checkpoint", health.Checkpoint{}, health.ErrNoCheckpoint, false, false},
		{"checkpoint of another stage", health.Checkpoint{Version: 1, Item: "PROJ-42", Stage: 1, AgentSession: "old"}, nil, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil)
			f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(true, nil)
			f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), gomock.Any()).Return(tt.cp, tt.cpErr)
			if tt.sessionErr {
				f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, p health.ResumePlan) (health.Resumed, error) {
					require.Equal(t, health.ResumeSession, p.Mode)
					return health.Resumed{}, errors.New("session expired")
				})
			}
			f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, p health.ResumePlan) (health.Resumed, error) {
				assert.Equal(t, health.ResumeFresh, p.Mode)
				assert.Empty(t, p.Session)
				if tt.wantPrompt {
					assert.Equal(t, health.RenderResume(tt.cp), p.Prompt)
					assert.Contains(t, p.Prompt, "Tasks remaining: T2")
				} else {
					assert.Empty(t, p.Prompt)
					assert.Nil(t, p.Checkpoint)
				}
				return health.Resumed{Assignment: "a2", Worker: "w2"}, nil
			})
			out := f.crash(t, "a1")
			assert.Equal(t, health.Working, out.State.Phase)
			assert.Equal(t, health.ResumeFresh, out.Resumed.Mode)
			assert.Equal(t, foreman.AssignmentID("a2"), out.Assignment)
		})
	}
}

func TestMonitorProbeTimeoutConfirmsCrashAndClosedItemIsNotResumed(t *testing.T) {
	f := newFixture(t, func(_ *fixture, c *health.MonitorConfig) { c.ProbeTimeout = 30 * time.Second })
	f.expectProbe("a1", nil)
	f.items.EXPECT().ItemOpen(gomock.Any(), foreman.ItemID("PROJ-42")).Return(false, nil)
	// No Resumer or Escalator call is expected: gomock fails the test on one.
	_, err := f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	f.clk.Advance(29 * time.Second)
	st, _ := f.m.State("PROJ-42")
	assert.Equal(t, health.Probing, st.Phase)
	f.clk.Advance(time.Second)

	_, watched := f.m.State("PROJ-42")
	assert.False(t, watched, "a closed item is no longer watched")
	last := f.transitions[len(f.transitions)-1]
	assert.Equal(t, health.Closed, last.To.Phase)
	assert.Equal(t, []health.Effect{health.EffectReportClosed}, last.Effects)
	assert.Equal(t, health.EventProbeTimeout, f.transitions[len(f.transitions)-2].Event)
}

func TestMonitorSecondCrashPausesWithActionableEscalation(t *testing.T) {
	f := newFixture(t, nil)
	f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil).Times(2)
	f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(true, nil)
	f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), gomock.Any()).Return(checkpointWith("s"), nil)
	f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).Return(health.Resumed{Assignment: "a2", Worker: "w1"}, nil)
	var got health.Escalation
	f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, e health.Escalation) error {
		got = e
		return nil
	})
	f.crash(t, "a1")
	f.clk.Advance(time.Minute)
	out := f.crash(t, "a2")

	assert.Equal(t, health.Paused, out.State.Phase)
	require.NotNil(t, out.Escalation)
	assert.Equal(t, got, *out.Escalation)
	assert.Equal(t, foreman.ItemID("PROJ-42"), got.Item)
	assert.Equal(t, 2, got.Stage)
	assert.Equal(t, foreman.AssignmentID("a2"), got.Assignment)
	assert.Equal(t, health.ReasonCrashBudgetExhausted, got.Reason)
	assert.Equal(t, 2, got.Crashes)
	assert.Equal(t, 1, got.CrashBudget)
	assert.Equal(t, 2, got.Probes)
	assert.Contains(t, got.Message, "crashed 2 time(s) at stage 2")
	assert.NotEmpty(t, got.SuggestedAction)
	assert.Equal(t, start.Add(time.Minute), got.At)
	_, watched := f.m.State("PROJ-42")
	assert.False(t, watched)
}

func TestMonitorFailuresPause(t *testing.T) {
	tests := []struct {
		name   string
		setup  func(f *fixture)
		reason health.PauseReason
		detail string
	}{
		{"item check fails", func(f *fixture) {
			f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(false, errors.New("tracker down"))
		}, health.ReasonItemCheckFailed, "tracker down"},
		{"resume fails", func(f *fixture) {
			f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(true, nil)
			f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), gomock.Any()).Return(checkpointWith(""), nil)
			f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).Return(health.Resumed{}, errors.New("no capacity"))
		}, health.ReasonResumeFailed, "no capacity"},
		{"resumer returns an invalid assignment", func(f *fixture) {
			f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(true, nil)
			f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), gomock.Any()).Return(checkpointWith(""), nil)
			f.resumer.EXPECT().Resume(gomock.Any(), gomock.Any()).Return(health.Resumed{Assignment: "../bad"}, nil)
		}, health.ReasonResumeFailed, "invalid"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newFixture(t, nil)
			f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil)
			tt.setup(f)
			var got health.Escalation
			f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).DoAndReturn(func(_ context.Context, e health.Escalation) error {
				got = e
				return nil
			})
			out := f.crash(t, "a1")
			assert.Equal(t, health.Paused, out.State.Phase)
			assert.Equal(t, tt.reason, got.Reason)
			assert.Contains(t, got.Detail, tt.detail)
			assert.NotEmpty(t, got.SuggestedAction)
		})
	}
}

func TestMonitorProbeFailureConfirmsCrash(t *testing.T) {
	f := newFixture(t, func(_ *fixture, c *health.MonitorConfig) { c.CrashBudget = -1 })
	f.expectProbe("a1", errors.New("no such teammate"))
	f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(nil)
	out, err := f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Paused, out.State.Phase)
	assert.Equal(t, 0, out.Escalation.CrashBudget)
	assert.Contains(t, out.Escalation.Detail, "no such teammate")
}

// A corrupt checkpoint is not guessed around: the item pauses, and the file
// stays exactly as it was for a person to inspect.
func TestMonitorCorruptCheckpointPausesAndKeepsFile(t *testing.T) {
	tmp := t.TempDir()
	store, err := health.NewCheckpointStore(health.CheckpointStoreConfig{
		Dir: filepath.Join(tmp, "state"), WorktreeRoots: []string{filepath.Join(tmp, "worktrees")}})
	require.NoError(t, err)
	path := store.Path("PROJ-42")
	require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
	require.NoError(t, os.WriteFile(path, []byte(`{"version": 1, "item": "PROJ-42", "stage": `), 0o644))

	f := newFixture(t, func(_ *fixture, c *health.MonitorConfig) { c.Checkpoints = store })
	f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil)
	f.items.EXPECT().ItemOpen(gomock.Any(), gomock.Any()).Return(true, nil)
	f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(nil)
	out := f.crash(t, "a1")
	assert.Equal(t, health.Paused, out.State.Phase)
	assert.Equal(t, health.ReasonResumeFailed, out.Escalation.Reason)
	assert.Contains(t, out.Escalation.Detail, "corrupt checkpoint")
	data, err := os.ReadFile(path)
	require.NoError(t, err)
	assert.Equal(t, `{"version": 1, "item": "PROJ-42", "stage": `, string(data))
}

func TestMonitorLostCompletion(t *testing.T) {
	confirmed := checkpointWith("")
	tests := []struct {
		name      string
		disable   bool
		cp        health.Checkpoint
		cpErr     error
		wantPhase health.Phase
	}{
		{"synthesized from checkpoint", false, confirmed, nil, health.Completed},
		{"synthesis disabled: probe", true, confirmed, nil, health.Probing},
		{"no checkpoint: probe", false, health.Checkpoint{}, health.ErrNoCheckpoint, health.Probing},
		{"checkpoint of another assignment: probe", false,
			health.Checkpoint{Version: 1, Item: "PROJ-42", Stage: 2, Assignment: "a0"}, nil, health.Probing},
	}
	for _, tt := range tests {
		for _, proactive := range []bool{false, true} {
			name := tt.name + "/on idle"
			if proactive {
				name = tt.name + "/proactive"
			}
			t.Run(name, func(t *testing.T) {
				f := newFixture(t, func(f *fixture, c *health.MonitorConfig) {
					c.DoneMarkers, c.Completer, c.DisableLostCompletionSynthesis = f.markers, f.completer, tt.disable
				})
				f.markers.EXPECT().DoneMarkerExists(gomock.Any(), health.Subject{Item: "PROJ-42", Stage: 2, Assignment: "a1", Worker: "w1"}).Return(true, nil)
				if !tt.disable {
					f.checkpoints.EXPECT().LoadCheckpoint(gomock.Any(), foreman.ItemID("PROJ-42")).Return(tt.cp, tt.cpErr)
				}
				if tt.wantPhase == health.Completed {
					f.completer.EXPECT().CompleteFromCheckpoint(gomock.Any(), health.SynthesizedCompletion{
						Item: "PROJ-42", Stage: 2, Assignment: "a1", Worker: "w1", Checkpoint: tt.cp}).Return(nil)
				} else {
					f.expectProbe("a1", nil)
				}
				call := f.m.Idle
				if proactive {
					call = f.m.CheckLostCompletion
				}
				out, err := call(context.Background(), "a1")
				require.NoError(t, err)
				assert.Equal(t, tt.wantPhase, out.State.Phase)
				if tt.wantPhase == health.Completed {
					require.NotNil(t, out.Completion)
					_, watched := f.m.State("PROJ-42")
					assert.False(t, watched)
				}
			})
		}
	}
}

func TestMonitorNoDoneMarker(t *testing.T) {
	f := newFixture(t, func(f *fixture, c *health.MonitorConfig) { c.DoneMarkers, c.Completer = f.markers, f.completer })
	f.markers.EXPECT().DoneMarkerExists(gomock.Any(), gomock.Any()).Return(false, nil)
	out, err := f.m.CheckLostCompletion(context.Background(), "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Working, out.State.Phase)
	assert.Empty(t, f.transitions)

	f.markers.EXPECT().DoneMarkerExists(gomock.Any(), gomock.Any()).Return(false, errors.New("disk"))
	f.expectProbe("a1", nil)
	out, err = f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Probing, out.State.Phase, "a failed marker check falls back to the probe")
}

func TestMonitorCompletedEndsWatch(t *testing.T) {
	f := newFixture(t, nil)
	ctx := context.Background()
	f.expectProbe("a1", nil)
	_, err := f.m.Idle(ctx, "a1")
	require.NoError(t, err)
	out, err := f.m.Completed(ctx, "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Completed, out.State.Phase)
	assert.Zero(t, f.clk.Pending())
	_, err = f.m.Completed(ctx, "a1")
	assert.ErrorIs(t, err, health.ErrStaleAssignment)
	_, err = f.m.Reply(ctx, "a1", okReply)
	assert.ErrorIs(t, err, health.ErrStaleAssignment)
}

func TestMonitorCancelledProbeStaysPendingAndIsRetried(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, health.Probe) error {
		cancel()
		return context.Canceled
	})
	out, err := f.m.Idle(ctx, "a1")
	require.ErrorIs(t, err, context.Canceled)
	assert.Equal(t, health.Suspicious, out.State.Phase)
	assert.Zero(t, out.State.Crashes, "our own cancellation is not the worker's crash")

	f.expectProbe("a1", nil)
	out, err = f.m.Retry(context.Background(), "PROJ-42")
	require.NoError(t, err)
	assert.Equal(t, health.Probing, out.State.Phase)
}

func TestMonitorIdleWhileSuspiciousProbesAgain(t *testing.T) {
	f := newFixture(t, nil)
	ctx, cancel := context.WithCancel(context.Background())
	f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).DoAndReturn(func(context.Context, health.Probe) error {
		cancel()
		return context.Canceled
	})
	_, err := f.m.Idle(ctx, "a1")
	require.Error(t, err)
	f.expectProbe("a1", nil)
	out, err := f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	assert.Equal(t, health.Probing, out.State.Phase)
	assert.Zero(t, out.State.Crashes)
	assert.Equal(t, 2, out.State.Probes)
}

func TestMonitorRefusedEscalationIsReissued(t *testing.T) {
	f := newFixture(t, func(_ *fixture, c *health.MonitorConfig) { c.CrashBudget = -1 })
	f.prober.EXPECT().Probe(gomock.Any(), gomock.Any()).Return(nil)
	gomock.InOrder(
		f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(errors.New("pager down")),
		f.escalator.EXPECT().Escalate(gomock.Any(), gomock.Any()).Return(nil),
	)
	_, err := f.m.Idle(context.Background(), "a1")
	require.NoError(t, err)
	out, err := f.m.Idle(context.Background(), "a1")
	require.ErrorContains(t, err, "pager down")
	assert.Equal(t, health.Paused, out.State.Phase)
	_, watched := f.m.State("PROJ-42")
	assert.True(t, watched, "kept until the escalation is delivered")

	out, err = f.m.Retry(context.Background(), "PROJ-42")
	require.NoError(t, err)
	require.NotNil(t, out.Escalation)
	_, watched = f.m.State("PROJ-42")
	assert.False(t, watched)
}
