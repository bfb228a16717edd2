package worker_test

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

type verifierFunc func(ctx context.Context, s phases.Snapshot, p phases.GatePlan, o phases.VerifyOptions) (phases.VerificationReport, error)

func (f verifierFunc) Verify(ctx context.Context, s phases.Snapshot, p phases.GatePlan, o phases.VerifyOptions) (phases.VerificationReport, error) {
	return f(ctx, s, p, o)
}

func failedReport(output string) phases.VerificationReport {
	return phases.VerificationReport{Levels: []phases.LevelResult{{Level: phases.L1Tests, Checks: []phases.CheckResult{
		{Name: "unit", Level: phases.L1Tests, ExitCode: 1, Output: output},
	}}}}
}

var passedReport = phases.VerificationReport{Passed: true, Levels: []phases.LevelResult{{Level: phases.L1Tests, Passed: true}}}

// gateScript answers the gate's runs in order with reports; the last one
// repeats.
func gateScript(reports ...phases.VerificationReport) (phases.Verifier, *[]phases.Snapshot) {
	var mu sync.Mutex
	var seen []phases.Snapshot
	return verifierFunc(func(_ context.Context, s phases.Snapshot, _ phases.GatePlan, _ phases.VerifyOptions) (phases.VerificationReport, error) {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, s)
		return reports[min(len(seen), len(reports))-1], nil
	}), &seen
}

func TestRuntimeRunsTheGateFeedsFailuresBackAndReportsEachRun(t *testing.T) {
	tests := []struct {
		name     string
		reports  []phases.VerificationReport
		want     []bool // QGPassed of each MsgQGResult
		final    worker.MessageKind
		reason   string
		feedback int // agent executions that got the gate's feedback
	}{
		{"fails then passes", []phases.VerificationReport{failedReport("FAIL: TestParse"), passedReport},
			[]bool{false, true}, worker.MsgDone, "", 1},
		{"passes at once", []phases.VerificationReport{passedReport}, []bool{true}, worker.MsgDone, "", 0},
		{"fails every round", []phases.VerificationReport{failedReport("FAIL: TestParse")},
			[]bool{false, false, false}, worker.MsgFailed, "quality gate failed in 3 rounds: L1 unit", 2},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var mu sync.Mutex
			var reqs []phases.AgentRequest
			agent := worker.AgentFunc(func(_ context.Context, r phases.AgentRequest, _ phases.StreamCallback) (phases.AgentResult, error) {
				mu.Lock()
				reqs = append(reqs, r)
				mu.Unlock()
				res := phases.AgentResult{Success: true}
				res.Tokens.Output = 10
				return res, nil
			})
			gate, snaps := gateScript(tc.reports...)
			in := make(chanInbox, 16)
			rt := worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0),
				Gate: worker.Gate{Verifier: gate}}, in)
			defer rt.Close(context.Background())
			require.NoError(t, rt.Send(context.Background(), assignCmd("a1", "w1", false)))
			require.Equal(t, worker.MsgHeartbeat, next(t, in).Kind)
			for i, passed := range tc.want {
				m := next(t, in)
				require.Equal(t, worker.MsgQGResult, m.Kind, "gate run %d", i+1)
				assert.Equal(t, passed, m.QGPassed)
				assert.Len(t, m.QGOutput, 64, "a digest, not the output")
				assert.Equal(t, foreman.AssignmentID("a1"), m.Assignment)
			}
			m := next(t, in)
			assert.Equal(t, tc.final, m.Kind)
			assert.Equal(t, tc.reason, m.Reason)
			assert.Equal(t, int64(10*len(tc.want)), m.Usage.Tokens, "usage of every round")

			mu.Lock()
			defer mu.Unlock()
			require.Len(t, reqs, len(tc.want))
			withFeedback := 0
			for _, r := range reqs {
				assert.Equal(t, 2, r.Iteration, "rounds stay within the assignment's attempt")
				if strings.Contains(r.Feedback, "FAIL: TestParse") {
					withFeedback++
					assert.Contains(t, r.Feedback, "L1 (Tests)")
				} else {
					assert.Equal(t, "add tests", r.Feedback, "the reviewer's feedback on the first round")
				}
			}
			assert.Equal(t, tc.feedback, withFeedback)
			for _, s := range *snaps {
				assert.Equal(t, "/wt/story-a", s.WorkspacePath)
			}
		})
	}
}

func TestQGDigestComparesFailuresNotTimings(t *testing.T) {
	a, b := failedReport("FAIL: TestParse"), failedReport("FAIL: TestParse")
	b.Levels[0].Checks[0].Duration = 7
	assert.Equal(t, worker.QGDigest(a), worker.QGDigest(b))
	assert.NotEqual(t, worker.QGDigest(a), worker.QGDigest(failedReport("FAIL: TestLex")))
}

// With the default Runtime and defaults everywhere, an agent that keeps
// failing the gate the same way is STUCK_QG: the third identical output
// escalates, the item is parked and the worker freed with nothing pending.
func TestDefaultRuntimeGateMakesStuckQGReachable(t *testing.T) {
	agent := worker.AgentFunc(func(context.Context, phases.AgentRequest, phases.StreamCallback) (phases.AgentResult, error) {
		return phases.AgentResult{Success: true}, nil
	})
	gate, _ := gateScript(failedReport("FAIL: TestParse"))
	rec := newRecorder()
	d, err := worker.New(worker.Config{MaxWorkers: 1, Agent: agent, Commits: worker.NoCommits, Clock: foreman.NewFakeClock(t0),
		Gate: worker.Gate{Verifier: gate}, Escalator: rec.escalator(), OnEvent: rec.hook})
	require.NoError(t, err)
	defer d.Close()
	require.NoError(t, d.Submit(context.Background(), worker.Item{ID: "story-a", Prompt: "p", Worktree: t.TempDir()}))

	for range 3 {
		qg := rec.await(t, kind(worker.EventQGResult))
		assert.Equal(t, "fail", qg.Reason)
	}
	esc := <-rec.escs
	assert.Equal(t, worker.StuckQG, esc.Kind)
	assert.Equal(t, 3, esc.QGRepeats)
	parked := rec.await(t, kind(worker.EventParked))
	assert.Equal(t, foreman.ItemID("story-a"), parked.Item)
	assert.Equal(t, esc.Reason, parked.Reason, "the parked event says why")
	rec.await(t, kind(worker.EventAgentExited))
	require.NoError(t, worker.CheckInvariants(d))
	for _, w := range d.Workers() {
		assert.Equal(t, worker.Idle, w.State)
		assert.Empty(t, w.PendingQGOutput)
	}
	assert.Zero(t, worker.StuckQGLen(d))
	assert.Equal(t, uint64(3), d.Stats().Progress, "each gate run is progress (the agent printed nothing)")
	assert.False(t, strings.Contains(esc.Reason, "FAIL"), "the escalation counts outputs: %s", esc.Reason)
}
