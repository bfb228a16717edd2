package transporttest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
)

// Factory returns a transport whose workers run agent and deliver their
// messages to inbox. The suite closes it (worker.Closer) when a test ends;
// anything else it started the Factory cleans up with t.Cleanup.
type Factory func(t *testing.T, agent phases.AgentDriver, inbox worker.Inbox) worker.Transport

// guard bounds every wait: a transport that loses a message hangs no
// longer than this. Not a timing assertion.
const guard = 30 * time.Second

// Run runs the conformance suite against the transports f makes.
func Run(t *testing.T, f Factory) {
	t.Run("AssignRunsTheAgentAndReportsItsOutcome", func(t *testing.T) { testOutcomes(t, f) })
	t.Run("RunningAssignmentHeartbeatsAndAnswersProbes", func(t *testing.T) { testHeartbeatAndProbe(t, f) })
	t.Run("KillAndResetStopTheAgentAndNothingFinalFollows", func(t *testing.T) { testKill(t, f) })
	t.Run("CommandsForAnotherAssignmentChangeNothing", func(t *testing.T) { testFence(t, f) })
	t.Run("DispatcherCompletesManyItems", func(t *testing.T) { testDispatcher(t, f) })
}

// inbox records messages and lets tests wait for one.
type inbox struct {
	mu      sync.Mutex
	msgs    []worker.Message
	arrived chan struct{}
}

func newInbox() *inbox { return &inbox{arrived: make(chan struct{}, 1)} }

func (in *inbox) Deliver(_ context.Context, m worker.Message) (worker.Disposition, error) {
	in.mu.Lock()
	in.msgs = append(in.msgs, m)
	in.mu.Unlock()
	select {
	case in.arrived <- struct{}{}:
	default:
	}
	return worker.Applied, nil
}

// await returns the first message matching ok, waiting for it.
func (in *inbox) await(t *testing.T, what string, ok func(worker.Message) bool) worker.Message {
	t.Helper()
	deadline := time.NewTimer(guard)
	defer deadline.Stop()
	for {
		in.mu.Lock()
		for _, m := range in.msgs {
			if ok(m) {
				in.mu.Unlock()
				return m
			}
		}
		in.mu.Unlock()
		select {
		case <-in.arrived:
		case <-deadline.C:
			t.Fatalf("no %s within %v; messages: %v", what, guard, in.all())
		}
	}
}

func (in *inbox) all() []worker.Message {
	in.mu.Lock()
	defer in.mu.Unlock()
	return append([]worker.Message(nil), in.msgs...)
}

func of(a foreman.AssignmentID, k worker.MessageKind) func(worker.Message) bool {
	return func(m worker.Message) bool { return m.Assignment == a && m.Kind == k }
}

func isFinal(k worker.MessageKind) bool {
	switch k {
	case worker.MsgDone, worker.MsgReadyForReview, worker.MsgFailed, worker.MsgRateLimited, worker.MsgNeedsPerson:
		return true
	}
	return false
}

func open(t *testing.T, f Factory, agent phases.AgentDriver) (worker.Transport, *inbox) {
	t.Helper()
	in := newInbox()
	tr := f(t, agent, in)
	t.Cleanup(func() {
		if c, ok := tr.(worker.Closer); ok {
			ctx, cancel := context.WithTimeout(context.Background(), guard)
			defer cancel()
			assert.NoError(t, c.Close(ctx))
		}
	})
	return tr, in
}

var seq struct {
	mu sync.Mutex
	n  int
}

// assign makes an ASSIGN command with ids unique in the process (several
// transports may share a database between tests).
func assign(worktree string, review bool) worker.Command {
	seq.mu.Lock()
	seq.n++
	n := seq.n
	seq.mu.Unlock()
	a := &worker.Assignment{
		ID: foreman.AssignmentID(fmt.Sprintf("tt-%d-%d", time.Now().UnixNano(), n)), Worker: foreman.WorkerID(fmt.Sprintf("w%d", n)),
		Item: foreman.ItemID(fmt.Sprintf("item-%d", n)), Prompt: "do item " + fmt.Sprint(n), Worktree: worktree, Attempt: 1,
		RequireReview: review,
	}
	return worker.Command{Kind: worker.CommandAssign, Worker: a.Worker, Assignment: a.ID, Assign: a}
}

func send(t *testing.T, tr worker.Transport, c worker.Command) {
	t.Helper()
	require.NoError(t, tr.Send(context.Background(), c), "send %s", c.Kind)
}
