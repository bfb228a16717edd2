package agentmcp_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/agentforeman/foreman/phases/agentmcp"
)

// A host starts the server, begins an assignment (which gives its agent a
// token of its own), and takes the report the agent sent when the stage
// ends; a report naming another assignment is refused, and the token stops
// working when the assignment ends.
func Example() {
	ctx := context.Background()
	srv := agentmcp.New(agentmcp.Config{
		// The host's check: here, any outcome but complete and error is
		// malformed, and the workspace always shows a change.
		Check: func(_ context.Context, a agentmcp.Assignment, r agentmcp.Report) (agentmcp.Check, error) {
			c := agentmcp.Check{ClaimsCompletion: r.Outcome == "complete", NeedsChange: true, Changed: true}
			if r.Outcome != "complete" && r.Outcome != "error" {
				c.Problem = "unknown outcome " + r.Outcome
			}
			return c, nil
		},
		// The host holds the agent whose token was used to account.
		OnRefused: func(_ context.Context, r agentmcp.Refusal) { fmt.Println("refused:", r) },
	})
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer srv.Close(ctx)
	token := srv.Begin(agentmcp.Assignment{ID: "US-001-a3", Item: "US-001", Stage: 2, Role: "builder", Outcomes: []string{"complete", "error"}})

	// The agent's side (an agent CLI uses its own MCP client, with
	// srv.Env(token) in its environment).
	agent, err := agentmcp.Dial(ctx, srv.URL(), token)
	if err != nil {
		log.Fatal(err)
	}
	defer agent.Close()
	res, err := agent.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete", Summary: "parser written, tests pass"})
	fmt.Println(res.Verdict, err)
	_, err = agent.Report(ctx, agentmcp.Report{Assignment: "US-001-a9", Outcome: "complete"})
	var te *agentmcp.ToolError
	fmt.Println(errors.As(err, &te))

	rep, ok := srv.End("US-001-a3")
	fmt.Println(ok, rep.Outcome, rep.Summary)
	_, err = agent.Report(ctx, agentmcp.Report{Assignment: "US-001-a3", Outcome: "complete"})
	st := srv.Stats()
	fmt.Println(err != nil, st.Accepted, st.Forged, st.Expired)
	// Output:
	// accepted <nil>
	// refused: MCP report for assignment "US-001-a9", not its own US-001-a3
	// true
	// true complete parser written, tests pass
	// refused: the MCP token of assignment US-001-a3 was used after its stage ended
	// true 1 1 1
}
