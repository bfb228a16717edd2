package team_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline"
	"github.com/agentforeman/foreman/pipeline/team"
)

// flowAgent plays the agent stages of the example's flow, by its role
// (FOREMAN_ROLE): the analyst and the designer report complete; the
// builder writes the feature, the second time as the reviewer asked (the
// feedback is in its prompt, $1) and commits; the reviewer asks for
// changes to a plain "hello", then approves with 8 of 10.
const flowAgent = `#!/bin/sh
set -eu
report() { printf '{"assignment":"%s","outcome":"%s"%s}\n' "$FOREMAN_ASSIGNMENT" "$1" "${2:-}" > "$FOREMAN_RESULT"; }
case "$FOREMAN_ROLE" in
analyst|designer) report complete ;;
builder)
  text="hello"
  case "$1" in *"say hello, world"*) text="hello, world";; esac
  echo "$text" > greeting
  git add greeting && { git diff --cached --quiet || git commit -qm "$FOREMAN_ITEM: $text"; }
  report complete ;;
reviewer)
  if [ "$(cat greeting)" = "hello, world" ]; then report approved ',"score":8'
  else report changes ',"score":3,"summary":"say hello, world"'; fi ;;
esac
`

// A team runs a flow of its own: five stages, each with its own outcomes
// and rules. The analysis and design stages run the agent once; the build
// runs the run loop; the review's CHANGES send the story back to the build
// with the reviewer's words; the quality gate runs the gate plan and its
// FAIL, too, goes back to the build; an ERROR anywhere pauses the story for
// a person. Worker names are left to their default (pipeline.DefaultWorker).
func Example_customFlow() {
	dir, err := os.MkdirTemp("", "foreman-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	repo, agent := filepath.Join(dir, "repo"), filepath.Join(dir, "agent.sh")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(agent, []byte(flowAgent), 0o755); err != nil {
		panic(err)
	}
	exampleGit(repo, "init", "-q", "-b", "main")
	exampleGit(repo, "commit", "-q", "--allow-empty", "-m", "an empty project")

	const (
		Approved pipeline.Outcome = "APPROVED"
		Changes  pipeline.Outcome = "CHANGES"
	)
	pause := func(what string) pipeline.Rule {
		return pipeline.Rule{Outcome: pipeline.Error, Action: pipeline.Pause, Result: "ERROR: {detail}",
			Escalate: "Story {id}: " + what + " failed: {detail}", Suggest: "fix the cause, then resolve the story"}
	}
	const build = 2
	flow := &pipeline.Flow{
		Name:        "reviewed",
		CrashBudget: 1,
		Stages: []pipeline.StageSpec{
			{Name: "analyse", Rules: []pipeline.Rule{
				{Outcome: pipeline.Complete, Action: pipeline.Advance, Result: "analysed"}, pause("analysis")}},
			{Name: "design", Rules: []pipeline.Rule{
				{Outcome: pipeline.Complete, Action: pipeline.Advance, Result: "designed"}, pause("design")}},
			{Name: "build", Rules: []pipeline.Rule{
				{Outcome: pipeline.Complete, Action: pipeline.Advance, Result: "built"}, pause("build")}},
			{Name: "review", Rules: []pipeline.Rule{
				{Outcome: Approved, Action: pipeline.Advance, Result: "approved {score}/10", MaxScore: 10},
				{Outcome: Changes, Action: pipeline.Rework, Target: build, Limit: 2, Feedback: true, MaxScore: 10,
					Result: "changes {score}/10: {detail}", Escalate: "Story {id}: the review asked for changes {times}"},
				pause("review")}},
			{Name: "gate", Rules: []pipeline.Rule{
				{Outcome: pipeline.Pass, Action: pipeline.MergeDone, Result: "{verdict}"},
				{Outcome: pipeline.Fail, Action: pipeline.Rework, Target: build, Limit: 2, Feedback: true,
					Result: "FAIL: {detail}", Escalate: "Story {id} failed the gate {times}"},
				pause("gate")}},
		},
	}

	ctx := context.Background()
	t, err := team.New(ctx, team.Config{
		Repo:  repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{agent, "{prompt}"}, Env: exampleGitEnv()}),
		Flow:  flow,
		Stages: []team.Stage{{Kind: team.StageAgent, Role: "analyst"}, {Kind: team.StageAgent, Role: "designer"},
			{Kind: team.StageBuild, Role: "builder"}, {Kind: team.StageAgent, Role: "reviewer"},
			{Kind: team.StageGate, Role: "quality gate"}},
		Gates:   phases.Commands(phases.L1Tests, "test -s greeting"),
		Workers: 1,
		Merge:   merge.Config{GitEnv: exampleGitEnv()[:2], Author: merge.Identity{Name: "Example", Email: "example@foreman.invalid"}},
	})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	if err := t.Add(ctx, team.Story{ID: "US-1", Title: "Greet", Body: "Write a greeting."}); err != nil {
		panic(err)
	}
	res, err := t.Run(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res)
	for _, e := range t.Events(0) {
		if e.Kind == team.EventStageFinished {
			fmt.Printf("stage %d %s: %s\n", e.Stage, flow.Stages[e.Stage].Name, e.Outcome)
		}
	}
	fmt.Print(exampleGit(repo, "log", "--format=%s", "main"))
	st, err := t.StatusOf(ctx, "US-1")
	if err != nil {
		panic(err)
	}
	fmt.Println(st.State, "at stage", st.Stage, st.Role+":", st.Last)
	fmt.Print(strings.TrimSpace(exampleGit(repo, "show", "main:greeting")), "\n")
	// Output:
	// 1 merged, 0 paused, 0 skipped, 0 abandoned, 0 blocked, 0 pending
	// stage 0 analyse: COMPLETE
	// stage 1 design: COMPLETE
	// stage 2 build: COMPLETE
	// stage 3 review: CHANGES
	// stage 2 build: COMPLETE
	// stage 3 review: APPROVED
	// stage 4 gate: PASS
	// US-1: Greet
	// an empty project
	// merged at stage 4 quality gate: 4: PASS
	// hello, world
}
