package worker_test

import (
	"bytes"
	"context"
	"log/slog"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/health"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestWorkerTransitionTable(t *testing.T) {
	allowed := map[worker.WorkerState]map[worker.WorkerEvent]worker.WorkerState{
		worker.Idle:         {worker.WorkerReserve: worker.Reserved, worker.WorkerShutdown: worker.ShuttingDown, worker.WorkerGone: worker.Stopped},
		worker.Reserved:     {worker.WorkerStart: worker.Busy, worker.WorkerRelease: worker.Idle, worker.WorkerShutdown: worker.ShuttingDown, worker.WorkerGone: worker.Stopped},
		worker.Busy:         {worker.WorkerReadyForReview: worker.Reviewing, worker.WorkerRelease: worker.Idle, worker.WorkerShutdown: worker.ShuttingDown, worker.WorkerGone: worker.Stopped},
		worker.Reviewing:    {worker.WorkerReassign: worker.Reserved, worker.WorkerRelease: worker.Idle, worker.WorkerShutdown: worker.ShuttingDown, worker.WorkerGone: worker.Stopped},
		worker.ShuttingDown: {worker.WorkerGone: worker.Stopped, worker.WorkerShutdown: worker.ShuttingDown, worker.WorkerRelease: worker.ShuttingDown, worker.WorkerReadyForReview: worker.ShuttingDown},
		worker.Stopped:      {worker.WorkerGone: worker.Stopped, worker.WorkerShutdown: worker.Stopped},
	}
	for from := worker.Idle; from <= worker.Stopped; from++ {
		for ev := worker.WorkerReserve; ev <= worker.WorkerGone; ev++ {
			to, err := worker.NextWorkerState(from, ev)
			if want, ok := allowed[from][ev]; ok {
				require.NoError(t, err, "%s + %s", from, ev)
				assert.Equal(t, want, to, "%s + %s", from, ev)
				continue
			}
			var te *worker.TransitionError
			require.ErrorAs(t, err, &te, "%s + %s", from, ev)
			assert.ErrorIs(t, err, worker.ErrInvalidTransition)
			assert.Equal(t, from, to)
			assert.Equal(t, "worker", te.Machine)
			assert.Contains(t, err.Error(), ev.String())
		}
	}
}

func TestItemTransitionTable(t *testing.T) {
	allowed := map[worker.ItemState]map[worker.ItemEvent]worker.ItemState{
		worker.Queued:     {worker.ItemAssign: worker.Assigned, worker.ItemPark: worker.Parked},
		worker.Assigned:   {worker.ItemReadyForReview: worker.InReview, worker.ItemRequeue: worker.Queued, worker.ItemComplete: worker.Done, worker.ItemPark: worker.Parked, worker.ItemRecover: worker.Recovering},
		worker.Recovering: {worker.ItemRequeue: worker.Queued, worker.ItemPark: worker.Parked, worker.ItemClose: worker.Done},
		worker.InReview:   {worker.ItemReassign: worker.Assigned, worker.ItemRequeue: worker.Queued, worker.ItemComplete: worker.Done, worker.ItemPark: worker.Parked},
		worker.Done:       {worker.ItemResubmit: worker.Queued},
		worker.Parked:     {worker.ItemResubmit: worker.Queued},
	}
	for from := worker.Queued; from <= worker.Recovering; from++ {
		for ev := worker.ItemAssign; ev <= worker.ItemClose; ev++ {
			to, err := worker.NextItemState(from, ev)
			if want, ok := allowed[from][ev]; ok {
				require.NoError(t, err)
				assert.Equal(t, want, to, "%s + %s", from, ev)
				continue
			}
			assert.ErrorIs(t, err, worker.ErrInvalidTransition, "%s + %s", from, ev)
			assert.Equal(t, from, to)
		}
	}
}

func TestNamesOfEnums(t *testing.T) {
	assert.Equal(t, "Reviewing", worker.Reviewing.String())
	assert.Equal(t, "Parked", worker.Parked.String())
	assert.Equal(t, "READY_FOR_REVIEW", worker.MsgReadyForReview.String())
	assert.Equal(t, "RESET", worker.CommandReset.String())
	assert.Equal(t, "PROBE", worker.CommandProbe.String())
	assert.Equal(t, "Recovering", worker.Recovering.String())
	assert.Equal(t, "Close", worker.ItemClose.String())
	assert.Equal(t, "duplicate", worker.Duplicate.String())
	assert.Equal(t, "fresh", worker.ModeFresh.String())
	assert.Equal(t, "UNKNOWN", worker.MessageKind(0).String())
}

func TestSlogEventsLogsEveryEventWithItsFields(t *testing.T) {
	var buf bytes.Buffer
	hook := worker.SlogEvents(slog.New(slog.NewTextHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})))
	esc := &worker.Escalation{Kind: worker.StuckWorker, SuggestedAction: "look"}
	hook(worker.Event{Kind: worker.EventEscalated, Worker: "w1", Assignment: "a1", Item: "story-a", Escalation: esc, Reason: "no progress"})
	hook(worker.Event{Kind: worker.EventWorkerState, Worker: "w1", From: worker.Idle, To: worker.Reserved})
	hook(worker.Event{Kind: worker.EventStale, Worker: "w1", Message: worker.MsgDone})
	out := buf.String()
	assert.Contains(t, out, "level=ERROR msg=\"worker: escalated\" worker=w1 assignment=a1 item=story-a reason=\"no progress\" escalation=STUCK_WORKER")
	assert.Contains(t, out, "from=Idle to=Reserved")
	assert.Contains(t, out, "level=WARN msg=\"worker: stale_message\" worker=w1 message=DONE")
	worker.SlogEvents(nil)(worker.Event{Kind: worker.EventShutdown}) // nil logger: no-op
}

func TestHealthEscalatorReceivesConvertedEscalations(t *testing.T) {
	ctrl := gomock.NewController(t)
	he := workermockHealth(ctrl)
	e := worker.Escalation{Kind: worker.CrashLimit, Item: "story-a", Stage: 2, Worker: "w1", Assignment: "a1",
		Reason: "liveness timeout", Crashes: 2, CrashBudget: 1, SuggestedAction: "check"}
	he.EXPECT().Escalate(gomock.Any(), health.Escalation{Item: "story-a", Stage: 2, Worker: "w1", Assignment: "a1",
		Message: "CRASH_LIMIT: liveness timeout", Crashes: 2, CrashBudget: 1, SuggestedAction: "check"}).Return(nil)
	require.NoError(t, worker.HealthEscalator(he).Escalate(context.Background(), e))
}

var _ worker.Transport = (*workermock.MockTransport)(nil)
var _ worker.Inbox = (*worker.Dispatcher)(nil)
var _ foreman.AssignmentID = worker.Assignment{}.ID
