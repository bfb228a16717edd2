package team_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/merge"
	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/pipeline/team"
)

// exampleAgent plays every stage of the story flow. The team runs it in the
// story's worktree with the prompt as $1 and FOREMAN_STAGE, FOREMAN_ITEM,
// FOREMAN_ASSIGNMENT and FOREMAN_RESULT in its environment: it plans (0),
// validates (1) and, in the build stage (2), adds a line to NOTES and
// commits; each time it writes its report to $FOREMAN_RESULT.
const exampleAgent = `#!/bin/sh
set -eu
outcome=complete
case "$FOREMAN_STAGE" in
1) outcome=go ;;
2) echo "$FOREMAN_ITEM was here" >> NOTES
   git add NOTES && git commit -qm "$FOREMAN_ITEM: a note" ;;
esac
printf '{"assignment": "%s", "outcome": "%s"}\n' "$FOREMAN_ASSIGNMENT" "$outcome" > "$FOREMAN_RESULT"
`

// exampleGitEnv commits as a fixed identity and leaves the machine's git
// config out (a global hook or commit signing would change the outcome).
func exampleGitEnv() []string {
	return []string{"GIT_CONFIG_GLOBAL=" + os.DevNull, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Example", "GIT_AUTHOR_EMAIL=example@foreman.invalid",
		"GIT_COMMITTER_NAME=Example", "GIT_COMMITTER_EMAIL=example@foreman.invalid"}
}

func exampleGit(dir string, args ...string) string {
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env = dir, append(os.Environ(), exampleGitEnv()...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		panic(fmt.Sprintf("git %s: %v: %s", strings.Join(args, " "), err, out))
	}
	return string(out)
}

// A team of one scripted agent works through two stories, the second
// after the first: each is planned, validated, built (its change checked
// against the gate plan), checked again by the quality gate and
// squash-merged onto main.
func Example() {
	dir, err := os.MkdirTemp("", "foreman-example-")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(dir)
	repo, agent := filepath.Join(dir, "repo"), filepath.Join(dir, "agent.sh")
	if err := os.MkdirAll(repo, 0o755); err != nil {
		panic(err)
	}
	if err := os.WriteFile(agent, []byte(exampleAgent), 0o755); err != nil {
		panic(err)
	}
	exampleGit(repo, "init", "-q", "-b", "main")
	exampleGit(repo, "commit", "-q", "--allow-empty", "-m", "an empty project")

	ctx := context.Background()
	t, err := team.New(ctx, team.Config{
		Repo:  repo,
		Agent: agentcmd.New(agentcmd.Config{Argv: []string{agent, "{prompt}"}, Env: exampleGitEnv()}),
		Gates: phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{
			{Name: "notes", Argv: []string{"test", "-s", "NOTES"}},
		}}}},
		Workers: 2,
		Merge:   merge.Config{GitEnv: exampleGitEnv()[:2], Author: merge.Identity{Name: "Example", Email: "example@foreman.invalid"}},
	})
	if err != nil {
		panic(err)
	}
	defer t.Close()
	err = t.Add(ctx,
		team.Story{ID: "US-001", Title: "Start the notes", Body: "Create NOTES with one line."},
		team.Story{ID: "US-002", Title: "Add to the notes", Body: "Add a line to NOTES.", After: []foreman.ItemID{"US-001"}},
	)
	if err != nil {
		panic(err)
	}
	res, err := t.Run(ctx)
	if err != nil {
		panic(err)
	}
	fmt.Println(res)
	fmt.Print(exampleGit(repo, "log", "--format=%s", "main"))
	fmt.Print(exampleGit(repo, "show", "main:NOTES"))
	// Output:
	// 2 merged, 0 paused, 0 skipped, 0 abandoned, 0 blocked, 0 pending
	// US-002: Add to the notes
	// US-001: Start the notes
	// an empty project
	// US-001 was here
	// US-002 was here
}
