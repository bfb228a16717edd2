package team

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/team/internal/teamcore"
	"github.com/agentforeman/foreman/worker"
)

// This file is the team's deterministic core: what a stage's evidence
// means, as pure functions of their inputs. The stage runner gathers the
// evidence (the agent's result, its result file, the run loop's result,
// the gate report) and acts on what these return.

// Report is what an agent writes, as JSON, to the file named by the
// FOREMAN_RESULT environment variable (a file in a directory of its
// assignment's own, see DefaultPrompt) to report its stage:
//
//	{"assignment": "$FOREMAN_ASSIGNMENT", "outcome": "complete", "summary": "what was done"}
//
// Outcome is one of the stage's outcomes, in any case: "complete" or
// "error" for a plan or build stage, "go", "no-go" or "error" for a
// validation stage, "pass", "concerns", "waived", "fail" or "error" for a
// quality stage. Summary is the reason, issues or error (one paragraph).
// Score is the stage's score (plan 0-4, readiness 0-10, quality 0-100;
// default the best for a positive outcome, 0 otherwise) and Tasks a plan's
// task count (default 1). A report whose assignment is not the current one
// is not taken, and counted as the agent's attempt beyond its assignment
// (EventRefused).
type Report struct {
	Assignment foreman.AssignmentID `json:"assignment"`
	Outcome    string               `json:"outcome"`
	Summary    string               `json:"summary,omitempty"`
	Score      *int                 `json:"score,omitempty"`
	Tasks      int                  `json:"tasks,omitempty"`
}

// The environment the team adds for an agent, beside pipeline's
// FOREMAN_ITEM, FOREMAN_STAGE, FOREMAN_WORKER and FOREMAN_ASSIGNMENT:
// EnvResult names the file it writes its Report to, EnvRole its stage's
// role (Stage.Role: the host's word for the stage).
const (
	EnvResult = "FOREMAN_RESULT"
	EnvRole   = "FOREMAN_ROLE"
)

// maxDetail bounds the details carried in a report.
const maxDetail = 600

// oneLine makes s fit a report line's free text (message.Detail).
func oneLine(s string, max int) string { return message.Detail(s, max) }

// agentEvidence is what an agent stage left behind.
type agentEvidence struct {
	// Flow is the team's flow, whose rules say what a report may say.
	Flow       *pipeline.Flow
	Item       foreman.ItemID
	Stage      int
	Assignment foreman.AssignmentID
	Result     phases.AgentResult
	// ExecErr is Execute's error: the agent could not be run at all.
	ExecErr error
	// MCP is the report the team's MCP server accepted from the agent (the
	// current assignment's, checked when it came), or nil.
	MCP *Report
	// File is the agent's result file, when it wrote one; FileErr says why
	// it could not be read or made sense of.
	File       *Report
	FileErr    error
	ResultPath string
	// Key is the assignment's report key, which a printed report line
	// must carry (printedReport).
	Key string
}

// agentVerdict decides an agent stage's report: the report the MCP
// server accepted first, then the result file (when it carries the
// current assignment), then a canonical line with the assignment's proof
// in the agent's final message or output (printedReport) that the stage
// can take, else an ERROR that says why there is no report (the agent's
// failure with its exit status and stderr, or its silence). refused says
// what the agent left that acts beyond its assignment and was not taken: a
// result file naming another assignment (whatever else it reported),
// printed report lines without the proof when nothing else was taken.
func agentVerdict(ev agentEvidence) (v message.Report, refused []string) {
	if ev.File != nil && ev.File.Assignment != ev.Assignment {
		refused = append(refused, foreignFile(ev.File.Assignment, ev.Assignment))
	}
	if ev.ExecErr != nil {
		return errorReport(ev.Item, ev.Stage, "the agent could not run: "+ev.ExecErr.Error()), refused
	}
	if ev.MCP != nil && ev.MCP.Assignment == ev.Assignment {
		if v, err := verdictOf(ev.Flow, ev.Item, ev.Stage, *ev.MCP); err == nil {
			return v, refused
		}
	}
	var fileProblem string
	switch {
	case ev.File != nil && ev.File.Assignment != ev.Assignment:
		fileProblem = foreignFile(ev.File.Assignment, ev.Assignment)
	case ev.File != nil:
		v, err := verdictOf(ev.Flow, ev.Item, ev.Stage, *ev.File)
		if err == nil {
			return v, nil
		}
		fileProblem = "result file: " + err.Error()
	case ev.FileErr != nil:
		fileProblem = "result file: " + ev.FileErr.Error()
	}
	var printed []printedRefusal
	for _, text := range []string{ev.Result.Result, ev.Result.Output} {
		v, ok, why := printedReport(ev.Item, ev.Stage, ev.Assignment, ev.Key, text)
		if ok {
			if err := checkVerdict(ev.Flow, v); err != nil {
				why = append(why, printedRefusal("a printed report line the stage cannot take: "+err.Error()))
			} else {
				return v, refused
			}
		}
		for _, w := range why {
			if !slices.Contains(printed, w) {
				printed = append(printed, w)
			}
		}
	}
	for _, w := range printed {
		refused = append(refused, string(w)+" (ignored)")
	}
	if len(printed) > 0 {
		if fileProblem != "" {
			fileProblem += "; "
		}
		fileProblem += string(printed[0]) + " (ignored)"
	}
	return errorReport(ev.Item, ev.Stage, agentFailure(ev.Result, fileProblem)), refused
}

// foreignFile says that a result file named another assignment.
func foreignFile(named, current foreman.AssignmentID) string {
	return fmt.Sprintf("result file names assignment %q, not the current %q (ignored)", named, current)
}

// agentFailure says why an agent produced no usable report.
func agentFailure(res phases.AgentResult, fileProblem string) string {
	var b strings.Builder
	switch {
	case res.Error != "" && res.APIError != nil:
		// Stopped by the driver, or failed, on the model API's word.
		b.WriteString("the agent's model API failed")
	case res.TimedOut:
		b.WriteString("the agent timed out")
	case res.Signal != "":
		fmt.Fprintf(&b, "the agent was killed by %s", res.Signal)
	case res.ExitCode != 0:
		fmt.Fprintf(&b, "the agent exited with status %d", res.ExitCode)
	case res.Error != "":
		b.WriteString("the agent reported an error")
	case fileProblem != "":
		b.WriteString("the agent finished without a usable report")
	default:
		b.WriteString("the agent finished without a report (no result file, no report line)")
	}
	if res.Error != "" {
		fmt.Fprintf(&b, ": %s", res.Error)
	}
	if e := res.APIError; e != nil {
		if d := apiErrorText(*e); !strings.Contains(res.Error, d) {
			fmt.Fprintf(&b, "; %s", d)
		}
	}
	if fileProblem != "" {
		fmt.Fprintf(&b, "; %s", fileProblem)
	}
	if tail := tailLines(res.Stderr, 5); tail != "" {
		fmt.Fprintf(&b, "; stderr: %s", tail)
	} else if tail := tailLines(res.Output, 3); tail != "" && res.ExitCode != 0 {
		fmt.Fprintf(&b, "; output: %s", tail)
	}
	return b.String()
}

// apiErrorText names the model API's error as the agent's CLI reported
// it: "model API 401 authentication_failed: Invalid API key".
func apiErrorText(e phases.AgentAPIError) string {
	d := "model API"
	if e.Status != 0 {
		d += fmt.Sprintf(" %d", e.Status)
	}
	if e.Code != "" {
		d += " " + e.Code
	}
	if e.Message != "" {
		d += ": " + e.Message
	}
	return d
}

// tailLines returns the last n non-empty lines of s, joined by " | ".
func tailLines(s string, n int) string {
	var keep []string
	lines := strings.Split(s, "\n")
	for i := len(lines) - 1; i >= 0 && len(keep) < n; i-- {
		if l := strings.TrimSpace(lines[i]); l != "" {
			keep = append([]string{l}, keep...)
		}
	}
	return strings.Join(keep, " | ")
}

// buildVerdict decides a build stage's report from its run: its outcome
// that moves the story on (COMPLETE) only when the run succeeded (changes
// since the base that passed the gates); otherwise ERROR with the run's
// reason and the last failing gates' output.
func buildVerdict(flow *pipeline.Flow, item foreman.ItemID, stage int, res phases.RunResult, err error) message.Report {
	if err != nil {
		return errorReport(item, stage, "the build could not run: "+err.Error())
	}
	if res.Succeeded() {
		return successVerdict(flow, item, stage, message.OutcomeComplete)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "build %s after %d iteration(s) (%s)", strings.ToLower(string(res.State)), len(res.Iterations), res.Reason)
	if res.Message != "" {
		fmt.Fprintf(&b, ": %s", res.Message)
	}
	if n := len(res.Iterations); n > 0 {
		ph := res.Iterations[n-1].Result.Phases
		if ph.Build != nil && ph.Build.AgentResult != nil && (!ph.Build.AgentResult.Success || ph.Build.AgentResult.ExitCode != 0) {
			b.WriteString("; " + agentFailure(*ph.Build.AgentResult, ""))
		}
		if ph.Verify != nil && ph.Verify.Report != nil && !ph.Verify.Report.Passed {
			b.WriteString("; failing checks: " + failureSummary(*ph.Verify.Report))
		}
	}
	return errorReport(item, stage, b.String())
}

// gateVerdict decides a gate stage's report from the gate report: PASS
// with the rule's best score (COMPLETE, or the stage's first outcome that
// moves the story on, in a stage without PASS); or FAIL with the share of
// checks that passed as its score and the failures as its issues (ERROR
// in a stage without FAIL).
func gateVerdict(flow *pipeline.Flow, item foreman.ItemID, stage int, rep phases.VerificationReport, plan phases.GatePlan) message.Report {
	if rep.Passed {
		return successVerdict(flow, item, stage, string(pipeline.Pass), message.OutcomeComplete)
	}
	total, failed := checkCount(plan), len(rep.FailedChecks())
	summary := failureSummary(rep)
	rule, ok := ruleFor(flow, stage, string(pipeline.Fail))
	if !ok {
		return errorReport(item, stage, "gates failed: "+summary)
	}
	v := message.Report{Item: item, Stage: stage, Outcome: string(pipeline.Fail), Detail: oneLine(summary, maxDetail)}
	if rule.MaxScore > 0 {
		v.Score, v.HasScore = max(rule.MaxScore*(total-failed)/max(total, 1), 0), true
	}
	return v
}

// failureSummary names each failing check with the lines of its output
// that say what failed.
func failureSummary(rep phases.VerificationReport) string {
	var parts []string
	for _, c := range rep.FailedChecks() {
		how := fmt.Sprintf("exit status %d", c.ExitCode)
		if c.TimedOut {
			how = "timed out"
		}
		text := keyLines(c.Output)
		if text == "" {
			text = "(no output)"
		}
		parts = append(parts, fmt.Sprintf("%s (%s) failed, %s: %s", strings.Join(c.Argv, " "), c.Level, how, text))
	}
	if len(parts) == 0 {
		return "verification failed"
	}
	return oneLine(strings.Join(parts, "; "), maxDetail)
}

// keyLines keeps the lines of a check's output that say what failed
// (test failures, file:line references, errors), else its last lines.
func keyLines(out string) string {
	var keep []string
	seen := map[string]bool{}
	for _, l := range strings.Split(out, "\n") {
		l = strings.TrimSpace(l)
		lower := strings.ToLower(l)
		decisive := strings.HasPrefix(l, "--- FAIL") || strings.HasPrefix(l, "panic:") || strings.HasPrefix(l, "fatal error:") ||
			strings.HasPrefix(lower, "error") || (strings.Contains(l, ".go:") && !stackFrame(l))
		if decisive && !seen[l] {
			seen[l] = true
			keep = append(keep, l)
		}
	}
	if len(keep) == 0 {
		return tailLines(out, 3)
	}
	return strings.Join(keep, " ")
}

// stackFrame reports whether l is a frame of a Go stack trace
// ("/usr/local/go/src/testing/testing.go:1934 +0x12f"): a panic's trace
// names a dozen files, and would push the panic's own line out of the
// detail.
func stackFrame(l string) bool {
	return strings.Contains(l, " +0x") || strings.HasPrefix(l, "/usr/local/go/") || strings.HasPrefix(l, "goroutine ") ||
		strings.HasPrefix(l, "created by ")
}

// boardAfter is the board entry a verified report leads to (see
// teamcore.BoardAfterReport). The team records it only after checking the
// stage's evidence itself, so the board is its ledger of verified claims.
func boardAfter(flow *pipeline.Flow, v message.Report, cur boardRecord) (boardRecord, bool) {
	return teamcore.BoardAfterReport(flow, v, cur)
}

// storyMove is what the team does when the task graph gives a story an
// assignment (teamcore.StoryMove).
type storyMove = teamcore.StoryMove

const (
	moveNothing   = teamcore.MoveNothing
	moveStart     = teamcore.MoveStart
	moveResolve   = teamcore.MoveResolve
	moveRespawn   = teamcore.MoveRespawn
	moveProbeLost = teamcore.MoveProbeLost
)

// spawnMove decides what a spawn of a story means, from its flow state
// and a person's decision (nil if none).
func spawnMove(st pipeline.State, d *decision) storyMove {
	return teamcore.SpawnMove(st, d != nil && d.restarts())
}

// graphMove is what the task graph is told about a story's flow state.
type graphMove = teamcore.GraphMove

const (
	graphNothing  = teamcore.GraphNothing
	graphComplete = teamcore.GraphComplete
	graphPark     = teamcore.GraphPark
)

// graphMoveFor decides what the task graph hears about a story's state.
func graphMoveFor(st pipeline.State) graphMove { return teamcore.GraphMoveFor(st) }

// heldByPool reports whether an agent's result is the worker pool's to
// act on rather than the stage's to report: a rate-limited agent (the pool
// backs off until the reset the provider named and runs the stage again,
// without counting a crash).
func heldByPool(res phases.AgentResult) bool { return res.RateLimit != nil && !res.Success }

// personReport is the ERROR report of a stage whose agent waits for a
// person (a question, a permission refused); ok is false when it does not.
// The story then pauses with the question for the person to answer;
// nothing answers it for them.
func personReport(item foreman.ItemID, stage int, res phases.AgentResult) (message.Report, bool) {
	q := worker.WaitingForPerson(res)
	if q == "" {
		return message.Report{}, false
	}
	return errorReport(item, stage, "the agent waits for a person: "+q), true
}

// paceFor is the worker pool's bound while limited stages back off from a
// rate limit: one agent fewer for each, at least one; 0 (no bound) when
// none is limited.
func paceFor(workers, limited int) int {
	if limited <= 0 {
		return 0
	}
	return max(1, workers-limited)
}

// resolveFeedback is what the worker after a person's retry or resume is
// told: what the person decided and wrote, why the story had paused, and
// that the worktree still holds the earlier attempt's work.
func resolveFeedback(action Action, note string, pause *pipeline.Escalation) string {
	var b strings.Builder
	switch action {
	case Resume:
		b.WriteString("A person resumed this story after fixing it by hand.")
	default:
		b.WriteString("A person sent this stage back to work.")
	}
	if note = strings.TrimSpace(note); note != "" {
		b.WriteString(" Their note: " + note)
	}
	if pause != nil && pause.Message != "" {
		b.WriteString("\nWhy the story had paused: " + pause.Message)
	}
	b.WriteString("\nThe story's worktree keeps the earlier attempt's work (its commits and files): build on it or correct it.")
	return b.String()
}
