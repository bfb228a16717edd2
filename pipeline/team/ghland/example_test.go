package ghland_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/agentforeman/foreman"
	"github.com/agentforeman/foreman/pipeline/team/ghland"
)

// A pull-request lander for a team: set it as team.Config.Merger, with
// the team's worktrees (Team.Worktree, through a variable set once the
// team is open) and a state directory for its records. New checks the
// Config and sends nothing; the team runs its Watch during every Run.
func ExampleNew() {
	worktree := func(id foreman.ItemID) (string, error) { return "/work/app/.worktrees/" + string(id), nil }
	_, err := ghland.New(ghland.Config{Owner: "acme", Repo: "app", Worktree: worktree, StateDir: "/work/app/.foreman/land"})
	fmt.Println(err)
	l, err := ghland.New(ghland.Config{Owner: "acme", Repo: "app", Token: "ghs_example", Worktree: worktree,
		StateDir: "/work/app/.foreman/land", Method: ghland.MethodWait})
	fmt.Println(err, l != nil)
	fmt.Println(ghland.Trailer("issue-12"))
	// Output:
	// ghland: invalid config: Token is required (set GITHUB_TOKEN)
	// <nil> true
	// Foreman-Item: issue-12
}

// Check, before the team runs, reads the repository once: an API that
// cannot be reached (no network, a wrong host) fails the run at its start,
// before any agent works.
func ExampleLander_Check() {
	l, err := ghland.New(ghland.Config{Owner: "acme", Repo: "app", Token: "ghs_example", BaseURL: "http://127.0.0.1:1/",
		Worktree: func(id foreman.ItemID) (string, error) { return "/work/app/.worktrees/" + string(id), nil },
		StateDir: "/work/app/.foreman/land"})
	if err != nil {
		fmt.Println(err)
		return
	}
	err = l.Check(context.Background())
	fmt.Println(errors.Is(err, ghland.ErrRepository), l.Stats().Requests)
	// Output:
	// true 1
}
