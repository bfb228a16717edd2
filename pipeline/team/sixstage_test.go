package team_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/internal/demo"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/message"
	"github.com/agentforeman/foreman/pipeline/team"
)

// sixStageAgent plays the agent stages of sixStageFlow and its build: the
// designer reports complete; the critic asks for changes once per story
// (<id>.criticised marks it) and then approves with 9 of 10; the build
// writes <id>.txt ("revised" after the critic's changes) and commits. A
// story with <id>.line reports its design and review with a printed line
// (a Report line, these being stages 2 and 4 of a flow of six) instead of
// the result file.
const sixStageAgent = `#!/bin/sh
set -eu
ctl=%CTL%
id=$FOREMAN_ITEM
echo "$id stage $FOREMAN_STAGE $FOREMAN_ROLE" >> "$ctl/log"
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
printed() { echo "$1 [assignment $FOREMAN_ASSIGNMENT key $FOREMAN_REPORT_KEY]"; }
case "$FOREMAN_ROLE" in
planner) report complete ',"tasks":2,"score":3' ;;
validator) report go ',"score":9' ;;
designer)
  if [ -e "$ctl/$id.line" ]; then printed "Stage 2 REPORT for $id: COMPLETE."; else report complete; fi ;;
critic)
  if [ -e "$ctl/$id.criticised" ]; then
    if [ -e "$ctl/$id.line" ]; then printed "Stage 4 REPORT for $id: APPROVED. Score: 9."; else report approved ',"score":9'; fi
  else
    touch "$ctl/$id.criticised"
    if [ -e "$ctl/$id.line" ]; then printed "Stage 4 REPORT for $id: CHANGES. Score: 4. Details: say revised"
    else report changes ',"score":4,"summary":"say revised"'; fi
  fi ;;
builder)
  content=first
  case "$*" in *"say revised"*) content=revised;; esac
  echo "$content" > "$id.txt"
  git add -A && { git diff --cached --quiet || git commit -qm "$id: $content"; }
  report complete ;;
esac
exit 0
`

// sixStageFlow has six stages: plan, validate, design, build, review (whose
// CHANGES send the story back to the build) and the quality gate.
func sixStageFlow() *pipeline.Flow {
	f := pipeline.StoryFlow(pipeline.StoryConfig{})
	plan, validate, build, quality := f.Stages[0], f.Stages[1], f.Stages[2], f.Stages[3]
	quality.Rules = append([]pipeline.Rule(nil), quality.Rules...)
	for i := range quality.Rules {
		if quality.Rules[i].Action == pipeline.Rework {
			quality.Rules[i].Target, quality.Rules[i].Worker = 3, "story-{id}-s3-fix{n}"
		}
	}
	design := pipeline.StageSpec{Name: "design", Rules: []pipeline.Rule{
		{Outcome: pipeline.Complete, Action: pipeline.Advance, Result: "designed"},
		{Outcome: pipeline.Error, Action: pipeline.Pause, Result: "ERROR: {detail}", Escalate: "Story {id} design failed: {detail}"}}}
	review := pipeline.StageSpec{Name: "review", Rules: []pipeline.Rule{
		{Outcome: "APPROVED", Action: pipeline.Advance, Result: "approved {score}/10", MaxScore: 10},
		{Outcome: "CHANGES", Action: pipeline.Rework, Target: 3, Limit: 2, Feedback: true, Worker: "story-{id}-s3-review{n}",
			MaxScore: 10, Result: "changes {score}/10: {detail}", Escalate: "Story {id}: the review asked for changes {times}"},
		{Outcome: pipeline.Error, Action: pipeline.Pause, Result: "ERROR: {detail}", Escalate: "Story {id} review failed: {detail}"}}}
	f.Name = "six"
	f.Stages = []pipeline.StageSpec{plan, validate, design, build, review, quality}
	return f
}

// TestSixStageFlowThroughTheTeam runs two stories through a team whose flow
// has six stages, with scripted agents (real subprocesses), real git and
// the real gate plan: one reports through the result file, the other with
// printed Report lines. Each is reworked once by the review at stage 4 and
// merged once; the status, the events and their lines name stages 0-5.
func TestSixStageFlowThroughTheTeam(t *testing.T) {
	f := newFixture(t)
	script, err := demo.WriteScript(filepath.Join(filepath.Dir(f.ctl), "bin"), "six.sh", strings.ReplaceAll(sixStageAgent, "%CTL%", demo.ShellQuote(f.ctl)))
	require.NoError(t, err)
	f.cfg.Agent = agentcmd.New(agentcmd.Config{Argv: []string{script, "{prompt}"}, Env: demo.GitEnv(), Sandbox: ctlSandbox(f.ctl)})
	f.cfg.Flow = sixStageFlow()
	f.cfg.Stages = []team.Stage{{Kind: team.StageAgent, Role: "planner"}, {Kind: team.StageAgent, Role: "validator"},
		{Kind: team.StageAgent, Role: "designer"}, {Kind: team.StageBuild, Role: "builder"}, {Kind: team.StageAgent, Role: "critic"},
		{Kind: team.StageGate, Role: "quality gate"}}
	f.cfg.Workers = 2
	f.touch(t, "US-2.line")
	tm := f.newTeam(t)
	require.NoError(t, tm.Add(context.Background(), team.Story{ID: "US-1", Title: "filed"}, team.Story{ID: "US-2", Title: "printed"}))
	res := run(t, tm)

	assert.Equal(t, 2, res.Merged, "%+v", res)
	assert.ElementsMatch(t, []string{"US-1", "US-2"}, trailers(t, f.repo))
	st, err := tm.Status(context.Background())
	require.NoError(t, err)
	for _, id := range []foreman.ItemID{"US-1", "US-2"} {
		s := stateOf(res, id)
		assert.Equal(t, team.StoryMerged, s.State, "%s: %+v", id, s.Pause)
		for _, ss := range st.Stories {
			if ss.ID == id {
				assert.Equal(t, 5, ss.Stage, id)
				assert.Equal(t, "quality gate", ss.Role, id)
			}
		}
		data, err := os.ReadFile(filepath.Join(f.repo, string(id)+".txt"))
		require.NoError(t, err)
		assert.Equal(t, "revised\n", string(data), "%s: the build after the review's changes landed", id)
	}
	finished := map[foreman.ItemID][]string{}
	for _, e := range tm.Events(0) {
		if e.Kind == team.EventStageFinished {
			finished[e.Story] = append(finished[e.Story], e.Line)
			m, err := message.Parse(e.Line)
			require.NoError(t, err, "an event's line is a line an agent could print: %q", e.Line)
			r, _ := message.ReportOf(m)
			assert.Equal(t, e.Stage, r.Stage, e.Line)
			assert.Equal(t, string(e.Outcome), r.Outcome, e.Line)
		}
	}
	for _, id := range []foreman.ItemID{"US-1", "US-2"} {
		lines := finished[id]
		require.Len(t, lines, 8, "%s: six stages, the build and the review twice: %q", id, lines)
		assert.Equal(t, "Stage 0 COMPLETE for "+string(id)+". 2 tasks created. Plan score: 3/4.", lines[0])
		// Stage 2's COMPLETE is said by the story flow's own line (Canonical),
		// whichever way it was reported.
		assert.Equal(t, "Stage 2 COMPLETE for "+string(id)+". All tasks Done. Story set to To Review.", lines[2])
		assert.Equal(t, "Stage 4 REPORT for "+string(id)+": CHANGES. Score: 4. Details: say revised", lines[4])
		assert.Equal(t, "Stage 4 REPORT for "+string(id)+": APPROVED. Score: 9.", lines[6])
		assert.Equal(t, "Stage 5 REPORT for "+string(id)+": PASS. Score: 100.", lines[7])
	}
	log, err := os.ReadFile(filepath.Join(f.ctl, "log"))
	require.NoError(t, err)
	assert.Equal(t, 2, strings.Count(string(log), "US-1 stage 4 critic"), "%s", log)
	out, err := json.Marshal(st)
	require.NoError(t, err)
	assert.Contains(t, string(out), `"stage":5`)
}

// TestFlowOutcomesMustBeReportable: an outcome no report can carry is a
// Config error at once, naming the stage.
func TestFlowOutcomesMustBeReportable(t *testing.T) {
	f := newFixture(t)
	f.cfg.Flow = sixStageFlow()
	f.cfg.Flow.Stages[4].Rules[0].Outcome = "looks good"
	f.cfg.Stages = []team.Stage{{Kind: team.StageAgent}, {Kind: team.StageAgent}, {Kind: team.StageAgent},
		{Kind: team.StageBuild}, {Kind: team.StageAgent}, {Kind: team.StageGate}}
	_, err := team.New(context.Background(), f.cfg)
	require.ErrorIs(t, err, team.ErrInvalidConfig)
	assert.Contains(t, err.Error(), `stage 4 (review): outcome "looks good" cannot be reported`)
}
