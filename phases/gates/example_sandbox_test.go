package gates_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/gates"
)

// cleanEnv is a Sandbox of the simplest kind: each check runs with nothing
// of the host's environment but PATH. agentcmd.Driver is the real one: it
// runs each check in its agents' bubblewrap sandbox.
type cleanEnv struct{}

func (cleanEnv) Contain(_ context.Context, cmd gates.CheckCommand) (gates.Contained, error) {
	cmd.Env = append([]string{"PATH=" + os.Getenv("PATH")}, cmd.Env...)
	return gates.Contained{CheckCommand: cmd, Done: func(context.Context) []string { return nil }}, nil
}

// A Verifier whose checks run contained: the host's secrets are not in a
// check's environment, what the check's own Env says is.
func ExampleSandbox() {
	dir, _ := os.MkdirTemp("", "gates-sandbox-example")
	defer os.RemoveAll(dir)
	os.Setenv("EXAMPLE_HOST_SECRET", "hunter2")
	defer os.Unsetenv("EXAMPLE_HOST_SECRET")

	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: cleanEnv{}})
	plan := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{
		Name: "env", Argv: []string{"sh", "-c", `echo "secret=[$EXAMPLE_HOST_SECRET] mode=[$MODE]"`}, Env: []string{"MODE=ci"},
	}}}}}
	rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: dir}, plan, phases.VerifyOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	check := rep.Levels[0].Checks[0]
	fmt.Print(check.Output)
	fmt.Println("passed:", check.Passed, "refused:", len(check.Refused))
	// Output:
	// secret=[] mode=[ci]
	// passed: true refused: 0
}
