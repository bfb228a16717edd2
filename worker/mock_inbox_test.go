package worker_test

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// kindIs matches a Message of kind k.
type kindIs worker.MessageKind

func (k kindIs) Matches(x any) bool {
	m, ok := x.(worker.Message)
	return ok && m.Kind == worker.MessageKind(k)
}

func (k kindIs) String() string { return "a " + worker.MessageKind(k).String() + " message" }

// An inbox that refuses a message (its store is down, say) does not stop
// the Runtime: the refusal is logged and the assignment's next messages
// still go out.
func TestRuntimeKeepsReportingWhenTheInboxRefusesAMessage(t *testing.T) {
	ctrl := gomock.NewController(t)
	inbox := workermock.NewMockInbox(ctrl)
	done := make(chan worker.Message, 1)
	gomock.InOrder(
		inbox.EXPECT().Deliver(gomock.Any(), kindIs(worker.MsgHeartbeat)).Return(worker.Disposition(0), errors.New("store down")),
		inbox.EXPECT().Deliver(gomock.Any(), kindIs(worker.MsgDone)).DoAndReturn(
			func(_ context.Context, m worker.Message) (worker.Disposition, error) {
				done <- m
				return worker.Applied, nil
			}),
	)
	var logs bytes.Buffer
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true}, nil
	})
	rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0),
		Logger: slog.New(slog.NewTextHandler(&logs, nil))}, inbox)
	require.NoError(t, rt.Send(context.Background(), assignCmd("a1", "w1", false)))
	m := <-done
	assert.Equal(t, foreman.AssignmentID("a1"), m.Assignment)
	require.NoError(t, rt.Close(context.Background()))
	assert.Contains(t, logs.String(), "message not delivered")
	assert.Contains(t, logs.String(), "store down")
}

// closingTransport is a Transport that owns its workers.
type closingTransport struct {
	*workermock.MockTransport
	*workermock.MockCloser
}

// Shutdown asks a Transport that owns workers to close them, within
// KillTimeout, and reports the workers it says did not stop.
func TestShutdownReportsWhatTheTransportCouldNotStop(t *testing.T) {
	ctrl := gomock.NewController(t)
	tr := closingTransport{workermock.NewMockTransport(ctrl), workermock.NewMockCloser(ctrl)}
	tr.MockTransport.EXPECT().Send(gomock.Any(), gomock.Any()).Return(nil).AnyTimes()
	stuck := &worker.StopError{Worker: "w1", Assignment: "a1", Err: context.DeadlineExceeded}
	tr.MockCloser.EXPECT().Close(gomock.Any()).DoAndReturn(func(ctx context.Context) error {
		require.NoError(t, ctx.Err(), "the kill timeout has not passed yet")
		return stuck
	})
	d, err := worker.New(worker.Config{MaxWorkers: 1, Transport: tr, Clock: foreman.NewFakeClock(t0)})
	require.NoError(t, err)
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a"}))
	err = d.Close()
	var se *worker.StopError
	require.ErrorAs(t, err, &se)
	assert.Equal(t, foreman.WorkerID("w1"), se.Worker)
	assert.Equal(t, err, d.Close(), "a second Close returns the first result without closing again")
}
