package phases

import (
	"context"
	"errors"
	"fmt"
	"strings"
)

// Why a run ends, apart from running it (runloop.go): the limit a
// retryable iteration reached (an agent refused the tools its work needs
// that made no changes, loop detection, the budget, the iteration count),
// which event ends a run whose context is done, and what its result's
// message says (the failed phase's error, the refused tools, GrantAdvice).

// limitReached checks, after a retryable iteration, whether another one
// may run: loop detection first (the most specific diagnosis), then the
// budget, then the iteration count.
func (r *run) limitReached(rec IterationRecord) (Reason, string) {
	diffRepeats := r.diffs.observe(rec.DiffKey)
	failureRepeats := r.failures.observe(rec.FailureKey)
	if rec.DiffKey == emptyDiffKey {
		if denied := refusedTools(rec.Result); denied != "" {
			return ReasonPermissionDenied, "the agent was refused " + denied + " and made no changes; " + GrantAdvice
		}
	}
	if n := r.limits.LoopThreshold; n > 0 {
		if diffRepeats >= n && rec.DiffKey == emptyDiffKey {
			return ReasonNoChanges, fmt.Sprintf("the agent made no changes %d iterations running", diffRepeats)
		}
		if diffRepeats >= n {
			return ReasonLoopDetected, fmt.Sprintf("the same diff %d iterations running", diffRepeats)
		}
		if failureRepeats >= n {
			return ReasonLoopDetected, fmt.Sprintf("the same failing gate output %d iterations running", failureRepeats)
		}
	}
	if r.limits.budgetSpent(r.res.Tokens, r.res.CostUSD) {
		return ReasonBudgetExceeded, fmt.Sprintf("spent %d tokens (limit %d) and $%.4f (limit $%.4f)",
			r.res.Tokens.Input+r.res.Tokens.Output, r.limits.MaxTokens, r.res.CostUSD, r.limits.MaxCostUSD)
	}
	if rec.Iteration >= r.limits.MaxIterations {
		return ReasonMaxIterations, fmt.Sprintf("%d of %d iterations used without passing verification",
			rec.Iteration, r.limits.MaxIterations)
	}
	return "", ""
}

// contextEnd says which event ends a run whose context is done: the
// wall-clock limit (ours or the caller's deadline) or a cancellation.
func contextEnd(ctx context.Context) (RunEvent, Reason, bool) {
	if ctx.Err() == nil {
		return "", "", false
	}
	cause := context.Cause(ctx)
	if errors.Is(cause, ErrWallClockExceeded) || errors.Is(cause, context.DeadlineExceeded) {
		return EventLimitExceeded, ReasonWallClock, true
	}
	return EventUserCanceled, ReasonCanceled, true
}

func isFailureEvent(ev RunEvent) bool {
	return ev == EventBuildFailed || ev == EventSnapshotFailed || ev == EventVerifyFailedTerminal
}

// phaseMessage is the error message of the last phase that failed.
func phaseMessage(r IterationResult) string {
	p := r.Phases
	switch {
	case p.Verify != nil && p.Verify.Error != nil:
		return p.Verify.Error.Message
	case p.Snapshot != nil && p.Snapshot.Error != nil:
		return p.Snapshot.Error.Message
	case p.Build != nil && p.Build.Error != nil:
		return p.Build.Error.Message
	}
	return ""
}

// GrantAdvice says what to do about an agent refused the tools its work
// needs.
const GrantAdvice = "grant what its work needs (Claude Code: --permission-mode, --allowedTools or --add-dir; " +
	"Codex: --sandbox workspace-write), or run it in an OS sandbox where its own prompts can be off, then retry"

// refusedTools lists the tool calls the iteration's agent was refused, as
// "Write (/repo/x.go), Bash (git commit -m x)"; empty when none was.
func refusedTools(res IterationResult) string {
	b := res.Phases.Build
	if b == nil || b.AgentResult == nil || len(b.AgentResult.PermissionDenials) == 0 {
		return ""
	}
	seen := map[AgentPermissionDenial]bool{}
	var parts []string
	for _, d := range b.AgentResult.PermissionDenials {
		if seen[d] {
			continue
		}
		seen[d] = true
		p := d.Tool
		if d.Input != "" {
			p += " (" + clipInput(d.Input) + ")"
		}
		parts = append(parts, p)
	}
	return strings.Join(parts, ", ")
}

func clipInput(s string) string {
	const max = 120
	if len(s) <= max {
		return s
	}
	return s[:max] + "…"
}
