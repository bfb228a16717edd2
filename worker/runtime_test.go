package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/workermock"
	"github.com/golang/mock/gomock"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// chanInbox hands every delivered message to a channel.
type chanInbox chan worker.Message

func (c chanInbox) Deliver(_ context.Context, m worker.Message) (worker.Disposition, error) {
	c <- m
	return worker.Applied, nil
}

func next(t *testing.T, in chanInbox) worker.Message {
	t.Helper()
	select {
	case m := <-in:
		return m
	case <-time.After(10 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("no message from the runtime")
		return worker.Message{}
	}
}

func assignCmd(id, w string, review bool) worker.Command {
	a := &worker.Assignment{ID: foreman.AssignmentID(id), Worker: foreman.WorkerID(w), Item: "story-a",
		Prompt: "fix it", Worktree: "/wt/story-a", Attempt: 2, MemoryContext: "earlier: use sqlite", Feedback: "add tests", RequireReview: review}
	return worker.Command{Kind: worker.CommandAssign, Worker: a.Worker, Assignment: a.ID, Assign: a}
}

func TestRuntimeHeartbeatsWithEvidenceAndReportsTheOutcome(t *testing.T) {
	ctrl := gomock.NewController(t)
	commits := workermock.NewMockCommitReader(ctrl)
	gomock.InOrder(
		commits.EXPECT().Head(gomock.Any(), "/wt/story-a").Return("c1", nil).Times(2),
		commits.EXPECT().Head(gomock.Any(), "/wt/story-a").Return("c2", nil),
	)
	clk := foreman.NewFakeClock(t0)
	finish, printed := make(chan struct{}), make(chan struct{})
	var req phases.AgentRequest
	agent := worker.AgentFunc(func(ctx context.Context, r phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
		req = r
		on(phases.StreamEvent{Time: t0.Add(time.Second), Kind: phases.StreamText, Line: "working"})
		on(phases.StreamEvent{Time: t0.Add(2 * time.Second), Kind: phases.StreamText, Line: "still"})
		close(printed)
		<-finish
		res := phases.AgentResult{Success: true}
		res.Tokens.Input, res.Tokens.Output, res.CostUSD = 100, 20, 0.01
		return res, nil
	})
	in := make(chanInbox, 16)
	rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: commits, Clock: clk}, in)
	require.NoError(t, rt.Send(context.Background(), assignCmd("a1", "w1", false)))

	first := next(t, in)
	assert.Equal(t, worker.MsgHeartbeat, first.Kind, "the runtime heartbeats at once, with the commit it starts from")
	assert.Equal(t, "c1", first.Commit)
	assert.Equal(t, foreman.AssignmentID("a1"), first.Assignment)
	status := next(t, in)
	assert.Equal(t, worker.MsgStatus, status.Kind)
	assert.Equal(t, worker.StatusRunning, status.Status)

	require.NoError(t, clk.BlockUntil(context.Background(), 1)) // the heartbeat ticker
	<-printed                                                   // both lines taken before the tick (CI saw the first only)
	clk.Advance(10 * time.Second)
	hb := next(t, in)
	assert.Equal(t, worker.MsgHeartbeat, hb.Kind)
	assert.True(t, hb.LastOutput.Equal(t0.Add(2*time.Second)), "last output %v", hb.LastOutput)
	clk.Advance(10 * time.Second)
	assert.Equal(t, "c2", next(t, in).Commit)

	close(finish)
	done := next(t, in)
	assert.Equal(t, worker.MsgDone, done.Kind)
	assert.Equal(t, worker.Usage{Tokens: 120, CostUSD: 0.01}, done.Usage)
	assert.Equal(t, "/wt/story-a", req.WorkspacePath)
	assert.Equal(t, 2, req.Iteration)
	assert.Equal(t, "add tests", req.Feedback)
	assert.Contains(t, req.TaskPrompt, "fix it")
	assert.Contains(t, req.TaskPrompt, "earlier: use sqlite")
	require.NoError(t, rt.Close(context.Background()))
	require.NoError(t, rt.Close(context.Background()), "safe twice")
	assert.ErrorIs(t, rt.Send(context.Background(), assignCmd("a2", "w1", false)), worker.ErrStopped)
}

func TestRuntimeOutcomes(t *testing.T) {
	tests := []struct {
		name   string
		review bool
		res    phases.AgentResult
		want   worker.MessageKind
		reason string
	}{
		{"success", false, phases.AgentResult{Success: true}, worker.MsgDone, ""},
		{"success awaiting review", true, phases.AgentResult{Success: true}, worker.MsgReadyForReview, ""},
		{"non-zero exit", false, phases.AgentResult{ExitCode: 3}, worker.MsgFailed, "exit 3"},
		{"killed", false, phases.AgentResult{ExitCode: -1, Signal: "SIGKILL"}, worker.MsgFailed, "killed by SIGKILL"},
		{"agent error", false, phases.AgentResult{Error: "rate limited"}, worker.MsgFailed, "exit 0: rate limited"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
				return tc.res, nil
			})
			in := make(chanInbox, 4)
			rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0)}, in)
			defer rt.Close(context.Background())
			require.NoError(t, rt.Send(context.Background(), assignCmd("a1", "w1", tc.review)))
			require.Equal(t, worker.MsgHeartbeat, next(t, in).Kind)
			m := next(t, in)
			assert.Equal(t, tc.want, m.Kind)
			assert.Equal(t, tc.reason, m.Reason)
		})
	}
}

func TestRuntimeKillAndResetCancelTheAgentAndNewAssignmentsStartClean(t *testing.T) {
	for _, kind := range []worker.CommandKind{worker.CommandKill, worker.CommandReset, worker.CommandShutdown} {
		t.Run(kind.String(), func(t *testing.T) {
			cancelled := make(chan foreman.AssignmentID, 2)
			agent := worker.AgentFunc(func(ctx context.Context, r phases.AgentRequest, on phases.StreamCallback) (phases.AgentResult, error) {
				on(phases.StreamEvent{Line: "x"})
				<-ctx.Done()
				cancelled <- foreman.AssignmentID(r.TaskPrompt[:2])
				return phases.AgentResult{Signal: "SIGTERM"}, ctx.Err()
			})
			in := make(chanInbox, 16)
			var exited []worker.Event
			rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0),
				OnEvent: func(e worker.Event) {
					if e.Kind == worker.EventAgentExited {
						exited = append(exited, e)
					}
				}}, in)
			cmd := assignCmd("a1", "w1", false)
			cmd.Assign.Prompt = "a1"
			require.NoError(t, rt.Send(context.Background(), cmd))
			next(t, in)                                         // heartbeat
			assert.Equal(t, worker.MsgStatus, next(t, in).Kind) // running
			// A KILL for another assignment of the same worker is ignored.
			require.NoError(t, rt.Send(context.Background(), worker.Command{Kind: worker.CommandKill, Worker: "w1", Assignment: "a0"}))
			require.NoError(t, rt.Send(context.Background(), worker.Command{Kind: kind, Worker: "w1", Assignment: "a1"}))
			assert.Equal(t, foreman.AssignmentID("a1"), <-cancelled)

			// A new assignment on the same worker starts from nothing: a fresh
			// heartbeat and a fresh first running status.
			cmd = assignCmd("a2", "w1", false)
			cmd.Assign.Prompt = "a2"
			require.NoError(t, rt.Send(context.Background(), cmd))
			for m := next(t, in); m.Assignment != "a2"; m = next(t, in) {
				assert.NotEqual(t, worker.MsgDone, m.Kind, "a killed assignment reports nothing")
			}
			assert.Equal(t, worker.MsgStatus, next(t, in).Kind)
			require.NoError(t, rt.Close(context.Background()))
			assert.Equal(t, foreman.AssignmentID("a2"), <-cancelled)
			require.Len(t, exited, 2)
		})
	}
}
