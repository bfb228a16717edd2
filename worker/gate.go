package worker

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman/phases"
)

// DefaultGateRounds is how many times the Runtime runs the agent within one
// assignment while its quality gate fails.
const DefaultGateRounds = 3

// Gate is a quality gate the Runtime runs in the worktree after every
// successful agent execution. Each run is reported to the Dispatcher as a
// MsgQGResult (progress; identical failures make the item STUCK_QG). A
// failure is fed back to the agent, which runs again within the same
// assignment, up to Rounds times in all; the assignment then ends FAILED
// (a crash, counted against CrashBudget). A pass ends it as the agent's
// success would (DONE or READY_FOR_REVIEW).
type Gate struct {
	// Verifier runs Plan; nil means no gate.
	Verifier phases.Verifier
	Plan     phases.GatePlan
	// Rounds bounds agent executions per assignment (default 3).
	Rounds int
}

func (g Gate) rounds() int {
	if g.Rounds <= 0 {
		return DefaultGateRounds
	}
	return g.Rounds
}

// gateFeedbackTail bounds how much of each failed check's output is fed
// back to the agent: the end of a test run's output says what failed.
const gateFeedbackTail = 4 << 10

// QGDigest is what the Runtime sends as a MsgQGResult's QGOutput: a SHA-256
// over the failed checks (level, name, exit code, timeout, output), not
// their durations. The same failure gives the same digest, which is all the
// stuck quality-gate rule compares, and a worker holds 64 hex digits as its
// pending output rather than up to a verifier's output limit per check.
func QGDigest(report phases.VerificationReport) string {
	h := sha256.New()
	for _, c := range report.FailedChecks() {
		fmt.Fprintf(h, "%s\x00%s\x00%d\x00%t\x00%d\x00", c.Level, c.Name, c.ExitCode, c.TimedOut, len(c.Output))
		h.Write([]byte(c.Output))
	}
	return hex.EncodeToString(h.Sum(nil))
}

// gateFeedback tells the agent what failed: the failed levels and checks,
// and the end of each failed check's output.
func gateFeedback(report phases.VerificationReport) string {
	var b strings.Builder
	b.WriteString(phases.FallbackFeedback(report))
	for _, c := range report.FailedChecks() {
		out := c.Output
		if len(out) > gateFeedbackTail {
			out = "..." + out[len(out)-gateFeedbackTail:]
		}
		b.WriteString("\n\n### " + c.Name + " (exit " + strconv.Itoa(c.ExitCode) + ")\n" + out)
	}
	return b.String()
}

// execute runs the agent, and the gate after each success, for rn's
// assignment. It reports every gate run, and returns the last execution's
// result with the usage of all of them, or gateErr set when the gate
// failed in every round.
func (r *Runtime) execute(ctx context.Context, rn *run, onEvent phases.StreamCallback) execResult {
	a := rn.a
	g := r.cfg.Gate
	req := agentRequest(rn, r.cfg.AgentTimeout)
	var used Usage
	for round := 1; ; round++ {
		res, err := r.cfg.Agent.Execute(ctx, req, onEvent)
		used = used.add(UsageOf(res))
		if err != nil || !res.Success || g.Verifier == nil || ctx.Err() != nil {
			return execResult{res: res, err: err, usage: used}
		}
		snap := phases.Snapshot{WorkspacePath: a.Worktree, RunID: phases.RunID(a.ID), Iteration: round}
		report, err := g.Verifier.Verify(ctx, snap, g.Plan, phases.VerifyOptions{RunID: snap.RunID, Iteration: round})
		if err != nil {
			return execResult{res: res, err: fmt.Errorf("quality gate: %w", err), usage: used}
		}
		if ctx.Err() != nil {
			return execResult{res: res, err: ctx.Err(), usage: used}
		}
		r.deliver(ctx, Message{Kind: MsgQGResult, Worker: a.Worker, Assignment: a.ID,
			QGPassed: report.Passed, QGOutput: QGDigest(report)})
		r.remark(rn) // a gate result is progress
		if report.Passed {
			return execResult{res: res, usage: used}
		}
		if round >= g.rounds() {
			return execResult{res: res, usage: used,
				gateErr: fmt.Sprintf("quality gate failed in %d rounds: %s", round, strings.Join(failedNames(report), ", "))}
		}
		req.Feedback = gateFeedback(report)
	}
}

func failedNames(report phases.VerificationReport) []string {
	var names []string
	for _, c := range report.FailedChecks() {
		names = append(names, string(c.Level)+" "+c.Name)
	}
	return names
}
