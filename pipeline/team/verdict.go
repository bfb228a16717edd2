package team

import (
	"fmt"
	"slices"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// What a stage's report may say is the flow's: these read the rules of the
// report's stage to make an agent's structured report, or the team's own
// verdict on evidence, a typed message.Report.

// errorReport is a stage's ERROR report.
func errorReport(item foreman.ItemID, stage int, detail string) message.Report {
	return message.ErrorReport(item, stage, detail, maxDetail)
}

// stageRules returns the rules of the flow's stage (none for a stage the
// flow lacks).
func stageRules(flow *pipeline.Flow, stage int) []pipeline.Rule {
	if flow == nil || stage < 0 || stage >= len(flow.Stages) {
		return nil
	}
	return flow.Stages[stage].Rules
}

// ruleFor finds the stage's rule for outcome.
func ruleFor(flow *pipeline.Flow, stage int, outcome string) (pipeline.Rule, bool) {
	for _, r := range stageRules(flow, stage) {
		if string(r.Outcome) == outcome {
			return r, true
		}
	}
	return pipeline.Rule{}, false
}

// succeeds reports whether a rule's outcome moves the story on (to the
// next stage or the merge) rather than round again or to a person.
func succeeds(r pipeline.Rule) bool {
	return r.Action == pipeline.Advance || r.Action == pipeline.MergeDone
}

// verdictOf turns an agent's structured report into the stage's typed
// report, by the flow's rule for its outcome: the score in the rule's
// range (default its best for an outcome that moves the story on, 0
// otherwise), a task count where the rule checks tasks (default 1), and the
// summary as the details of an outcome that does not move it on (a NO-GO's
// reason, a FAIL's issues). "error" is every stage's. An outcome the stage
// does not have, or a score out of its range, is an error.
func verdictOf(flow *pipeline.Flow, item foreman.ItemID, stage int, r Report) (message.Report, error) {
	outcome := strings.ToUpper(strings.TrimSpace(r.Outcome))
	if outcome == message.OutcomeError {
		return errorReport(item, stage, r.Summary), nil
	}
	rule, ok := ruleFor(flow, stage, outcome)
	if !ok {
		return message.Report{}, fmt.Errorf("outcome %q is not one of stage %d's (%s)", r.Outcome, stage, stageOutcomes(flow, stage))
	}
	v := message.Report{Item: item, Stage: stage, Outcome: outcome}
	if rule.MaxScore > 0 {
		switch {
		case r.Score == nil && succeeds(rule):
			v.Score = rule.MaxScore
		case r.Score == nil:
		case *r.Score < 0 || *r.Score > rule.MaxScore:
			return message.Report{}, fmt.Errorf("score %d is not in 0..%d", *r.Score, rule.MaxScore)
		default:
			v.Score = *r.Score
		}
		v.HasScore = true
	}
	if rule.Check.TasksExist {
		v.Tasks = min(max(r.Tasks, 1), message.MaxTasks)
	}
	if !succeeds(rule) {
		v.Detail = oneLine(r.Summary, maxDetail)
	}
	if err := message.Validate(v); err != nil {
		return message.Report{}, err
	}
	return v, nil
}

// checkVerdict checks a report an agent printed against the flow, as
// verdictOf checks a structured one: an outcome of the stage (or ERROR)
// and a score its rule takes.
func checkVerdict(flow *pipeline.Flow, v message.Report) error {
	if v.Outcome == message.OutcomeError {
		return nil
	}
	rule, ok := ruleFor(flow, v.Stage, v.Outcome)
	switch {
	case !ok:
		return fmt.Errorf("outcome %s is not one of stage %d's (%s)", v.Outcome, v.Stage, stageOutcomes(flow, v.Stage))
	case rule.MaxScore > 0 && (!v.HasScore || v.Score > rule.MaxScore):
		return fmt.Errorf("stage %d's %s needs a score in 0..%d", v.Stage, v.Outcome, rule.MaxScore)
	}
	return nil
}

// successVerdict is the report of a stage whose work the team verified
// itself (a build that passed its gates, a gate plan that passed): the
// first of preferred the stage has, else its first outcome that moves the
// story on, with that rule's best score and one task where it counts them.
func successVerdict(flow *pipeline.Flow, item foreman.ItemID, stage int, preferred ...string) message.Report {
	outcome := ""
	for _, o := range preferred {
		if _, ok := ruleFor(flow, stage, o); ok {
			outcome = o
			break
		}
	}
	for _, r := range stageRules(flow, stage) {
		if outcome == "" && succeeds(r) {
			outcome = string(r.Outcome)
		}
	}
	if outcome == "" {
		outcome = message.OutcomeComplete
	}
	v, err := verdictOf(flow, item, stage, Report{Outcome: outcome})
	if err != nil {
		return message.Report{Item: item, Stage: stage, Outcome: outcome}
	}
	return v
}

// stageOutcomes names the outcomes a report of the stage may give, as an
// agent writes them: the flow's, in its order, and error.
func stageOutcomes(flow *pipeline.Flow, stage int) string {
	var out []string
	for _, r := range stageRules(flow, stage) {
		out = append(out, strings.ToLower(string(r.Outcome)))
	}
	if !slices.Contains(out, "error") {
		out = append(out, "error")
	}
	return strings.Join(out, ", ")
}
