package team

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
)

// reviewVerdict decides a review from the reviewer's report: approve or
// reject (the summary is the feedback) with the current assignment, else
// an error saying why there is no verdict (which rejects).
func reviewVerdict(rep *Report, fileErr error, res phases.AgentResult, assignment foreman.AssignmentID) (bool, string, error) {
	if rep != nil && rep.Assignment == assignment {
		switch strings.ToLower(strings.TrimSpace(rep.Outcome)) {
		case "approve", "approved":
			return true, rep.Summary, nil
		case "reject", "rejected":
			if strings.TrimSpace(rep.Summary) == "" {
				return false, "rejected without a reason", nil
			}
			return false, rep.Summary, nil
		}
		return false, "", fmt.Errorf("the reviewer's outcome %q is not approve or reject", rep.Outcome)
	}
	problem := ""
	switch {
	case rep != nil:
		problem = fmt.Sprintf("result file names assignment %q, not the current %q (ignored)", rep.Assignment, assignment)
	case fileErr != nil:
		problem = "result file: " + fileErr.Error()
	}
	return false, "", errors.New("the reviewer gave no verdict: " + agentFailure(res, problem))
}

// review runs the reviewer agent on a build stage's work
// (pipeline.ReviewFunc).
func (t *Team) review(ctx context.Context, r pipeline.ReviewRequest) (bool, string, error) {
	s, _ := t.story(r.Item)
	// A result directory of the review's own, as a stage's (credentials.go).
	cred := t.credentialOf(string(r.Assignment) + "-review-" + strconv.Itoa(r.Attempt))
	if err := openResultDir(cred); err != nil {
		return false, "", fmt.Errorf("team: making the reviewer's result directory: %w", err)
	}
	defer t.closeResultDir(cred)
	path := cred.ResultPath()
	branch, _ := t.mgr.Branch(r.Item)
	var b strings.Builder
	fmt.Fprintf(&b, "You are the reviewer for story %s: %s\n\n", s.ID, s.Title)
	if body := strings.TrimSpace(s.Body); body != "" {
		fmt.Fprintf(&b, "## The story\n\n%s\n\n", body)
	}
	fmt.Fprintf(&b, "## Your task\n\nReview the work in %s (branch %s): its change against %s is `git diff %s...HEAD`, "+
		"uncommitted files included. Approve it if it does what the story asks, correctly and with tests; "+
		"otherwise reject it and say exactly what to change. Do not change any file.\n\n", r.Workspace, branch, t.mgr.Target(), t.mgr.Target())
	fmt.Fprintf(&b, "This is attempt %d; the builder reported: %s\n\n", r.Attempt, r.Report)
	fmt.Fprintf(&b, "## How to report\n\nWrite JSON to the file %s (also in $%s):\n  {\"assignment\": %q, \"outcome\": \"approve\" or \"reject\", \"summary\": \"<what to change>\"}\n",
		path, EnvResult, r.Assignment)
	env := append(pipeline.AssignmentEnv(r.SpawnRequest), EnvResult+"="+path, EnvRole+"="+t.cfg.ReviewerRole)
	// What the reviewer's sandbox refused after it counts as the
	// builder's stage refusals do.
	onEvent := t.watchSandbox(ctx, pipeline.AgentAssignment{Item: r.Item, Stage: r.Stage, Worker: r.Worker, Assignment: r.Assignment}, nil)
	res, err := t.cfg.Reviewer.Execute(ctx, phases.AgentRequest{WorkspacePath: r.Workspace, TaskPrompt: b.String(), Env: env,
		Writable: []string{cred.Dir}}, onEvent)
	if err != nil {
		return false, "", err
	}
	rep, ferr := readReport(path)
	if rep != nil && rep.Assignment != r.Assignment {
		t.refuse(ctx, refusal{Item: r.Item, Stage: r.Stage, Worker: r.Worker, Assignment: r.Assignment,
			Detail: "the reviewer's " + foreignFile(rep.Assignment, r.Assignment)})
	}
	approved, feedback, verr := reviewVerdict(rep, ferr, res, r.Assignment)
	detail := feedback
	if verr != nil {
		detail = verr.Error()
	}
	t.events.add(Event{Kind: EventReviewed, At: t.clk.Now(), Story: r.Item, Stage: r.Stage, Role: t.cfg.ReviewerRole,
		Assignment: r.Assignment, Outcome: verdictOutcome(approved), Detail: detail})
	return approved, feedback, verr
}

func verdictOutcome(approved bool) pipeline.Outcome {
	if approved {
		return "APPROVED"
	}
	return "REJECTED"
}
