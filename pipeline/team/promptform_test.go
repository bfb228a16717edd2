package team

import (
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman/pipeline"
)

// TestPromptOfAStageBeyondTheStoryFlow: a stage after the story flow's
// four, with outcomes of its own, is told its outcomes, its score range
// and a Report line; that line, with the key filled in, is a report the
// stage takes, and the example as given is not.
func TestPromptOfAStageBeyondTheStoryFlow(t *testing.T) {
	flow := pipeline.StoryFlow(pipeline.StoryConfig{})
	review := pipeline.StageSpec{Name: "review", Rules: []pipeline.Rule{
		{Outcome: "APPROVED", Action: pipeline.Advance, MaxScore: 10},
		{Outcome: "CHANGES", Action: pipeline.Rework, Target: 2, Limit: 2, MaxScore: 10},
	}}
	flow.Stages = append(flow.Stages[:3:3], review, flow.Stages[3])
	d := PromptData{Story: Story{ID: "US-1", Title: "t"}, Stage: 3, StageName: "review", Role: "critic", Kind: StageAgent,
		Assignment: "US-1-a7", ResultPath: "/r/result.json", ReportKey: "00112233445566778899aabbccddeeff", Form: formOf(flow, 3)}
	prompt := DefaultPrompt(d)
	assert.Contains(t, prompt, "Outcomes of this stage: approved, changes, error.")
	assert.Contains(t, prompt, `"outcome": "approved" or "changes", "score": <0-10>`)
	assert.NotContains(t, prompt, "Quality Score", "not the story flow's Stage 3 line")
	var example string
	for _, l := range strings.Split(prompt, "\n") {
		if strings.Contains(l, keyPlaceholder+"]") {
			example = strings.TrimSpace(l)
		}
	}
	assert.Equal(t, "Stage 3 REPORT for US-1: APPROVED. Score: 10. [assignment US-1-a7 key <your report key>]", example)
	_, ok, _ := printedReport("US-1", 3, d.Assignment, d.ReportKey, prompt)
	assert.False(t, ok, "the example as given")
	v, ok, refused := printedReport("US-1", 3, d.Assignment, d.ReportKey, strings.Replace(example, keyPlaceholder, d.ReportKey, 1))
	require.True(t, ok, "%v", refused)
	require.NoError(t, checkVerdict(flow, v))
	assert.Equal(t, "APPROVED", v.Outcome)

	// The story flow's stages keep their own lines.
	d.Stage, d.Form = 4, formOf(flow, 4)
	assert.Contains(t, DefaultPrompt(d), "Stage 4 REPORT for US-1: PASS. Score: 100.")
	d.Stage, d.Form = 1, formOf(flow, 1)
	assert.Contains(t, DefaultPrompt(d), "Stage 1 COMPLETE for US-1. Verdict: GO. Readiness: 8.")
}

// TestAPrintedReportTheStageCannotTakeIsNotTaken: a Report line may carry
// outcomes and scores the stage's rules do not have; printed with the
// right proof it is still not taken, and the ERROR says why.
func TestAPrintedReportTheStageCannotTakeIsNotTaken(t *testing.T) {
	key := "00112233445566778899aabbccddeeff"
	for line, why := range map[string]string{
		"Stage 1 REPORT for US-1: GO. Score: 50.":   "stage 1's GO needs a score in 0..10",
		"Stage 1 REPORT for US-1: MAYBE. Score: 5.": "outcome MAYBE is not one of stage 1's (go, no-go, error)",
		"Stage 1 REPORT for US-1: GO.":              "stage 1's GO needs a score in 0..10",
	} {
		ev := agentEvidence{Flow: storyFlow, Item: "US-1", Stage: 1, Assignment: "US-1-a2", Key: key}
		ev.Result.Output = taggedLine(line, ev.Assignment, key)
		v, refused := agentVerdict(ev)
		assert.Equal(t, "ERROR", v.Outcome, line)
		assert.Contains(t, v.Detail, why, line)
		assert.Len(t, refused, 1, line)
	}
	ev := agentEvidence{Flow: storyFlow, Item: "US-1", Stage: 1, Assignment: "US-1-a2", Key: key}
	ev.Result.Output = taggedLine("Stage 1 REPORT for US-1: NO-GO. Score: 3. Details: too big", ev.Assignment, key)
	v, refused := agentVerdict(ev)
	assert.Empty(t, refused)
	assert.Equal(t, "Stage 1 COMPLETE for US-1. Verdict: NO-GO. Readiness: 3. Reason: too big", lineOf(v))
}
