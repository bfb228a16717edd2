package team

import (
	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
)

// The decisions' reports as the lines an agent, a person and the events
// read (message.Line), for the story flow: the tables of decide_test.go
// say what each decision means in those lines.

var storyFlow = pipeline.StoryFlow(pipeline.StoryConfig{})

func reportLine(item foreman.ItemID, stage int, r Report) (string, error) {
	v, err := verdictOf(storyFlow, item, stage, r)
	if err != nil {
		return "", err
	}
	return message.Line(v), nil
}

func errorLine(item foreman.ItemID, stage int, detail string) string {
	return message.Line(errorReport(item, stage, detail))
}

func agentStageLine(ev agentEvidence) (string, []string) {
	if ev.Flow == nil {
		ev.Flow = storyFlow
	}
	v, refused := agentVerdict(ev)
	return message.Line(v), refused
}

func gateStageLine(item foreman.ItemID, stage int, rep phases.VerificationReport, plan phases.GatePlan) string {
	return message.Line(gateVerdict(storyFlow, item, stage, rep, plan))
}

func buildStageLine(item foreman.ItemID, stage int, res phases.RunResult, err error) string {
	return message.Line(buildVerdict(storyFlow, item, stage, res, err))
}

func personLine(item foreman.ItemID, stage int, res phases.AgentResult) string {
	v, ok := personReport(item, stage, res)
	if !ok {
		return ""
	}
	return message.Line(v)
}

// boardAfterLine is boardAfter of a report line about stage.
func boardAfterLine(flow *pipeline.Flow, stage int, line string, cur boardRecord) (boardRecord, bool) {
	m, err := message.Parse(line)
	if err != nil {
		return cur, false
	}
	v, ok := message.ReportOf(m)
	if !ok {
		return cur, false
	}
	v.Stage = stage
	return boardAfter(flow, v, cur)
}

// printedLine is printedReport's report as its line ("" for none).
func printedLine(item foreman.ItemID, stage int, a foreman.AssignmentID, key, text string) (string, []printedRefusal) {
	v, ok, refused := printedReport(item, stage, a, key, text)
	if !ok {
		return "", refused
	}
	return message.Line(v), refused
}

// lineOf is a report's line.
func lineOf(v message.Report) string { return message.Line(v) }
