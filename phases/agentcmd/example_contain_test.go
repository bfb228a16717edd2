package agentcmd_test

import (
	"context"
	"fmt"
	"os"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
	"github.com/agentforeman/foreman/phases/gates"
)

// The gates run the agent's code (a test it wrote), so they run as the
// agent does: a Verifier whose Sandbox is the agent's driver runs each
// check in its sandbox (here turned off, where the check still gets an
// environment built from an allowlist: none of the host's secrets, no
// agent CLI's API key).
func ExampleDriver_Contain() {
	dir, _ := os.MkdirTemp("", "agentcmd-contain-example")
	defer os.RemoveAll(dir)
	os.Setenv("FOREMAN_NOTIFY_SECRET", "webhook-secret")
	os.Setenv("ANTHROPIC_API_KEY", "the-agents-key")
	defer os.Unsetenv("FOREMAN_NOTIFY_SECRET")
	defer os.Unsetenv("ANTHROPIC_API_KEY")

	driver := agentcmd.New(agentcmd.Config{Format: agentcmd.FormatClaude, Sandbox: agentcmd.Sandbox{Mode: agentcmd.SandboxOff}})
	v := gates.NewVerifier(gates.VerifierConfig{Sandbox: driver})
	plan := phases.GatePlan{Levels: []phases.GateLevel{{Level: phases.L1Tests, Checks: []phases.GateCheck{{
		Name: "env", Argv: []string{"sh", "-c", `echo "secret=[$FOREMAN_NOTIFY_SECRET] key=[$ANTHROPIC_API_KEY]"`},
	}}}}}
	rep, err := v.Verify(context.Background(), phases.Snapshot{WorkspacePath: dir}, plan, phases.VerifyOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(rep.Levels[0].Checks[0].Output)
	// Output:
	// secret=[] key=[]
}
