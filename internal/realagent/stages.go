package realagent

import (
	"encoding/json"
	"fmt"
	"regexp"

	"github.com/agentforeman/foreman/modeltest"
	"github.com/agentforeman/foreman/pipeline"
)

// What a team's prompt (pipeline/team.DefaultPrompt) tells its agent, read
// back by the scripted model the way a real model reads it.
var (
	resultPathRE = regexp.MustCompile(`Write your report as JSON to the file (\S+) `)
	reportKeyRE  = regexp.MustCompile(`Your report key: (\S+) `)
	workspaceRE  = regexp.MustCompile(`## Your workspace\n\n(\S+), a git worktree`)
)

// Assignment is what a stage's prompt says about the agent's assignment.
type Assignment struct {
	pipeline.AgentAssignment
	// ResultPath is the result file; ReportKey the key a printed line
	// carries; Workspace the story's worktree.
	ResultPath, ReportKey, Workspace string
}

// ReadAssignment reads the assignment block, the result file's path and the
// report key from a team's stage prompt.
func ReadAssignment(prompt string) (Assignment, error) {
	a, ok := pipeline.ParseAssignment(prompt)
	if !ok {
		return Assignment{}, fmt.Errorf("realagent: the prompt has no assignment block: %.200q", prompt)
	}
	out := Assignment{AgentAssignment: a}
	if m := resultPathRE.FindStringSubmatch(prompt); m != nil {
		out.ResultPath = m[1]
	}
	if m := reportKeyRE.FindStringSubmatch(prompt); m != nil {
		out.ReportKey = m[1]
	}
	if m := workspaceRE.FindStringSubmatch(prompt); m != nil {
		out.Workspace = m[1]
	}
	return out, nil
}

// Report is a stage's report as a scripted model makes it.
type Report struct {
	Outcome string
	Score   *int
	Tasks   int
	Summary string
}

// json is the report's JSON for the assignment.
func (r Report) json(a Assignment) map[string]any {
	m := map[string]any{"assignment": string(a.Assignment), "outcome": r.Outcome}
	if r.Score != nil {
		m["score"] = *r.Score
	}
	if r.Tasks > 0 {
		m["tasks"] = r.Tasks
	}
	if r.Summary != "" {
		m["summary"] = r.Summary
	}
	return m
}

// Score is a report's score.
func Score(n int) *int { return &n }

// ReportTool is a turn calling the team's MCP report tool
// (mcp__foreman__report: Claude Code loads it with ToolSearch first) with r
// for the prompt's assignment.
func ReportTool(r Report) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		a, err := ReadAssignment(in.Prompt)
		if err != nil {
			return modeltest.Say(err.Error())
		}
		return modeltest.Do(modeltest.Tool("mcp__foreman__report", r.json(a)))
	}}
}

// ReportFile is a turn writing r as JSON to the prompt's result file.
func ReportFile(r Report) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		a, err := ReadAssignment(in.Prompt)
		if err != nil || a.ResultPath == "" {
			return modeltest.Say(fmt.Sprintf("no result path in the prompt (%v)", err))
		}
		return modeltest.Do(modeltest.WriteFile(a.ResultPath, jsonText(r.json(a))))
	}}
}

// SayLine is a final turn ending with the stage's canonical line (line,
// with %s for the story id) tagged with the assignment and its report key.
func SayLine(line string) modeltest.Turn {
	return modeltest.Turn{Reply: func(in modeltest.Input) modeltest.Turn {
		a, err := ReadAssignment(in.Prompt)
		if err != nil {
			return modeltest.Say(err.Error())
		}
		return modeltest.Say(fmt.Sprintf("Done.\n"+line+" [assignment %s key %s]", a.Item, a.Assignment, a.ReportKey))
	}}
}

func jsonText(m map[string]any) string {
	b, err := json.Marshal(m)
	if err != nil {
		return err.Error()
	}
	return string(b)
}
