package team_test

import (
	"fmt"
	"strings"

	"github.com/agentforeman/foreman/pipeline/team"
)

// A stories file read into a plan: the stories for Team.Add, and the team
// settings it gives. Its gates are commands the host would run, so they
// wait in UntrustedGates until the host has consent. A mistake is refused
// with its line.
func ExampleParsePlan() {
	plan, err := team.ParsePlan(strings.NewReader(`
gates:
  - {name: test, argv: [go, test, ./...]}
stories:
  - id: US-001
    title: Parse the config file
  - id: US-002
    title: Reload the config on SIGHUP
    after: [US-001]
`))
	if err != nil {
		panic(err)
	}
	for _, s := range plan.Stories {
		fmt.Println(s.ID, s.Title, s.After)
	}
	fmt.Println(plan.UntrustedGates.Levels[0].Level, plan.UntrustedGates.Levels[0].Checks[0].Argv)
	// What to ask the person running the host before Config.Gates =
	// plan.UntrustedGates (the reference binary: -trust-plan-gates).
	fmt.Println(plan.GatesNeedConsent())

	_, err = team.ParsePlan(strings.NewReader("stories:\n  - id: US-001\n    tilte: typo\n"))
	fmt.Println(err)
	// Output:
	// US-001 Parse the config file []
	// US-002 Reload the config on SIGHUP [US-001]
	// L1 [go test ./...]
	// team: the stories file has gates, commands this host would run in every story's worktree: "test" (go test ./...); a stories file with gates is code: run them only if you trust whoever wrote the file
	// team: plan, line 3: unknown field "tilte" (a story has id, title, body, after)
}
