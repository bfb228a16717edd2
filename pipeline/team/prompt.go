package team

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases/agentmcp"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// PromptData is what a stage's prompt is made from.
type PromptData struct {
	Story Story
	// Stage is the stage's number in the flow, StageName its name in the
	// flow, Role the host's word for who performs it, Kind how.
	Stage     int
	StageName string
	Role      string
	Kind      StageKind
	// Instructions say what the stage asks (Stage.Instructions or
	// DefaultInstructions).
	Instructions string
	// Workspace is the story's git worktree, on branch Branch.
	Workspace string
	Branch    string
	// Worker and Assignment identify this attempt; a report by any means
	// must carry Assignment.
	Worker     foreman.WorkerID
	Assignment foreman.AssignmentID
	// ResultPath is where the agent writes its Report (also in the
	// environment as FOREMAN_RESULT): a file in a directory of this
	// assignment's own, whose name no other agent can guess, which the
	// team makes before the agent starts and removes once it has read it.
	ResultPath string
	// ReportKey is the key a printed report line must carry after the
	// stage's canonical line, "[assignment <Assignment> key <ReportKey>]"
	// (also in the environment as FOREMAN_REPORT_KEY): a prompt of the
	// host's own that offers the printed line gives it, on a line of its
	// own, and never in an example line, so that a prompt echoed back
	// holds no line the team takes.
	ReportKey string
	// Feedback is what went wrong in the previous round (a NO-GO reason,
	// the quality gate's issues, a person's note when resolving);
	// GateFeedback the quality gate's full feedback, when the last round
	// failed it.
	Feedback     string
	GateFeedback string
	// Conflict is the merge conflict a build stage is given back to
	// resolve (conflict triage): the files and both sides of each hunk.
	Conflict string
	// Readiness is the validation stage's score, once there is one.
	Readiness string
	// Resume is set when this worker replaces one that crashed.
	Resume bool
	// MCP is set when the agent can report through the team's MCP server
	// (Config.MCP): its report tool, with Assignment as the fence.
	MCP bool
	// Form is what a report of the stage may say, from the team's flow;
	// when its Outcomes are empty DefaultPrompt uses the story flow's for
	// the stage's number.
	Form ReportForm
}

// ReportForm is what a report of a stage may say: its outcomes as an agent
// writes them (lower case, the flow's order, "error" last), the range of
// its score (0..MaxScore; 0: the stage takes none) and whether it counts
// tasks.
type ReportForm struct {
	Outcomes []string
	MaxScore int
	Tasks    bool
}

// formOf is the report form of the flow's stage.
func formOf(flow *pipeline.Flow, stage int) ReportForm {
	f := ReportForm{Outcomes: strings.Split(stageOutcomes(flow, stage), ", ")}
	for _, r := range stageRules(flow, stage) {
		f.MaxScore = max(f.MaxScore, r.MaxScore)
		f.Tasks = f.Tasks || r.Check.TasksExist
	}
	return f
}

// reported are the outcomes of f a report gives for work done, error aside
// (at least one: "complete" when f has none).
func (f ReportForm) reported() []string {
	var out []string
	for _, o := range f.Outcomes {
		if o != "error" {
			out = append(out, o)
		}
	}
	if len(out) == 0 {
		out = []string{"complete"}
	}
	return out
}

// storyForm is the report form of the story flow's stage, for a prompt
// whose Form is empty.
func storyForm(stage int) ReportForm {
	return formOf(pipeline.StoryFlow(pipeline.StoryConfig{}), min(stage, message.MaxStoryStage))
}

// storyShaped reports whether d's stage reports as the story flow's stage
// of its number does, so that its prompt shows that stage's lines.
func storyShaped(d PromptData) bool {
	return d.Stage <= message.MaxStoryStage && slices.Equal(d.Form.Outcomes, storyForm(d.Stage).Outcomes)
}

// DefaultInstructions says what a stage asks of its agent, by the flow's
// stage name and the stage's kind.
func DefaultInstructions(stageName string, kind StageKind) string {
	switch {
	case kind == StageBuild:
		return "Implement the story in the workspace, with tests, and commit your work with git. " +
			"Your change is checked against the project's gates (its build and tests) after you finish; " +
			"if they fail you get their output and another try."
	case kind == StageGate:
		return "Check the story's work against the project's gates."
	case stageName == "plan":
		return "Plan the story: read the code in the workspace and break the story into concrete tasks. " +
			"Do not change any file."
	case stageName == "validate":
		return "Check that the story and its plan are clear, feasible and consistent with the code in the workspace. " +
			"Report go if it can be implemented as written, no-go with the reason if not. Do not change any file."
	}
	return "Do the " + stageName + " stage of the story."
}

// DefaultPrompt renders a stage's prompt: the story, the workspace, what
// the stage asks, the previous round's feedback, and exactly how to report.
func DefaultPrompt(d PromptData) string {
	if len(d.Form.Outcomes) == 0 {
		d.Form = storyForm(d.Stage)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "You are the %s for story %s: %s\n\n", d.Role, d.Story.ID, d.Story.Title)
	if body := strings.TrimSpace(d.Story.Body); body != "" {
		fmt.Fprintf(&b, "## The story\n\n%s\n\n", body)
	}
	fmt.Fprintf(&b, "## Your workspace\n\n%s, a git worktree on branch %s. Work only there.\n\n", d.Workspace, d.Branch)
	fmt.Fprintf(&b, "## Your task (%s stage)\n\n%s\n\n", d.StageName, d.Instructions)
	if d.Resume {
		b.WriteString("A previous worker on this stage stopped before it reported; continue from what is in the workspace.\n\n")
	}
	if d.Feedback != "" || d.GateFeedback != "" {
		b.WriteString("## Feedback from the previous round\n\n")
		if d.Feedback != "" {
			b.WriteString(d.Feedback + "\n\n")
		}
		if d.GateFeedback != "" && d.GateFeedback != d.Feedback {
			b.WriteString(d.GateFeedback + "\n\n")
		}
	}
	if d.Conflict != "" {
		b.WriteString("## The merge conflict to resolve\n\n" + d.Conflict + "\n\n")
	}
	if d.Kind == StageBuild {
		b.WriteString("## When you are done\n\nCommit your work and exit. If you cannot do it, say why in the result file below " +
			`with "outcome": "error".` + "\n\n")
	} else {
		b.WriteString("## How to report\n\n")
	}
	if d.MCP {
		// A line of its own before the file's, which stays word for word:
		// agents that read the prompt find the result file as before.
		fmt.Fprintf(&b, "Report with the %s tool of the MCP server %q, the JSON below as its arguments: its answer says whether "+
			"the team took your report (its %s tool says what your assignment expects). If you cannot use it:\n",
			agentmcp.ToolReport, agentmcp.ServerName, agentmcp.ToolStatus)
	}
	fmt.Fprintf(&b, "Write your report as JSON to the file %s (also in $%s):\n  %s\n", d.ResultPath, EnvResult, reportExample(d))
	hint := ""
	switch {
	case !storyShaped(d) && d.Form.MaxScore > 0:
		hint = fmt.Sprintf(" and your own outcome and score in place of %s and %d", strings.ToUpper(d.Form.reported()[0]), d.Form.MaxScore)
	case !storyShaped(d):
	case d.Stage == 0 && d.Kind != StageBuild:
		hint = " and your task count and plan score in place of 3 and 4"
	}
	fmt.Fprintf(&b, "Outcomes of this stage: %s. Or end your last message with the line below, with your report key "+
		"in place of %s%s:\n  %s\n", strings.Join(d.Form.Outcomes, ", "), keyPlaceholder, hint, lineExample(d))
	if d.ReportKey != "" {
		// The key on a line of its own, never in a report line: an echo of
		// this prompt holds no line the team takes.
		fmt.Fprintf(&b, "Your report key: %s (also in $%s).\n", d.ReportKey, EnvReportKey)
	}
	b.WriteString("Report for your own assignment only: a report, a status query or a result for any other is refused, " +
		"and counted against your story.\n")
	return b.String()
}

func reportExample(d PromptData) string {
	if !storyShaped(d) {
		var b strings.Builder
		fmt.Fprintf(&b, `{"assignment": %q, "outcome": "%s"`, d.Assignment, strings.Join(d.Form.reported(), `" or "`))
		if d.Form.MaxScore > 0 {
			fmt.Fprintf(&b, `, "score": <0-%d>`, d.Form.MaxScore)
		}
		if d.Form.Tasks {
			b.WriteString(`, "tasks": <number of tasks>`)
		}
		b.WriteString(`, "summary": "<what you did, or the reason for your outcome>"}`)
		return b.String()
	}
	switch d.Stage {
	case 0:
		if d.Kind == StageBuild {
			break
		}
		return fmt.Sprintf(`{"assignment": %q, "outcome": "complete", "tasks": <number of tasks>, "score": <plan quality 0-4>, "summary": "<the plan>"}`, d.Assignment)
	case 1:
		return fmt.Sprintf(`{"assignment": %q, "outcome": "go" or "no-go", "score": <readiness 0-10>, "summary": "<reason for a no-go>"}`, d.Assignment)
	case 3:
		return fmt.Sprintf(`{"assignment": %q, "outcome": "pass" or "fail", "score": <quality 0-100>, "summary": "<issues for a fail>"}`, d.Assignment)
	}
	return fmt.Sprintf(`{"assignment": %q, "outcome": "complete", "summary": "<what you did>"}`, d.Assignment)
}

// lineExample is the printed report line, with keyPlaceholder for the
// key: taken back as it is, it is refused.
func lineExample(d PromptData) string {
	tag := func(line string) string { return taggedLine(line, d.Assignment, keyPlaceholder) }
	if !storyShaped(d) {
		r := message.Report{Item: d.Story.ID, Stage: d.Stage, Outcome: strings.ToUpper(d.Form.reported()[0]),
			Score: d.Form.MaxScore, HasScore: d.Form.MaxScore > 0}
		if d.Form.Tasks {
			r.Tasks = 1
		}
		return tag(message.Line(r))
	}
	switch d.Stage {
	case 0:
		return tag(message.Format(message.Stage0Complete{Item: d.Story.ID, Tasks: 3, PlanScore: 4}))
	case 1:
		return tag(message.Format(message.Stage1Complete{Item: d.Story.ID, Verdict: message.VerdictGo, Readiness: 8}))
	case 2:
		return tag(message.Format(message.Stage2Complete{Item: d.Story.ID}))
	}
	return tag(message.Format(message.Stage3Complete{Item: d.Story.ID, Verdict: message.VerdictPass, Score: 100}))
}
