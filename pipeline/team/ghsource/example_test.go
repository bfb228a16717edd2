package ghsource_test

import (
	"fmt"

	"github.com/agentforeman/foreman/pipeline/team/ghsource"
)

// A source spec, as the reference binary's -source takes it, read into a
// Config; New needs a token besides (TakeToken reads $GITHUB_TOKEN and
// removes it from the environment agents inherit).
func ExampleParseSpec() {
	cfg, err := ghsource.ParseSpec("github:acme/app?label=agents")
	fmt.Println(cfg.Owner, cfg.Repo, cfg.Label, err)
	_, err = ghsource.New(cfg)
	fmt.Println(err)
	// Output:
	// acme app agents <nil>
	// ghsource: invalid config: Token is required (set GITHUB_TOKEN)
}
