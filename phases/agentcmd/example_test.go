package agentcmd_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/phases/agentcmd"
)

// A tiny shell agent: the prompt arrives as $1 and each output line is
// streamed as it is printed.
func Example() {
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)

	driver := agentcmd.New(agentcmd.Config{
		Argv:    []string{"sh", "-c", `echo "working on: $1"; echo done > result.txt; echo finished`, "agent"},
		Timeout: time.Minute,
	})
	res, err := driver.Execute(context.Background(), phases.AgentRequest{
		WorkspacePath: workspace,
		TaskPrompt:    "write result.txt",
	}, func(ev phases.StreamEvent) {
		fmt.Printf("%s: %s\n", ev.Kind, ev.Text)
	})
	if err != nil {
		panic(err)
	}
	written, _ := os.ReadFile(workspace + "/result.txt")
	fmt.Printf("success=%v exit=%d wrote %q\n", res.Success, res.ExitCode, written)
	// Output:
	// text: working on: write result.txt
	// text: finished
	// success=true exit=0 wrote "done\n"
}

// Claude Code with its stream-json output parsed: the session id comes back
// in the result, to be passed as AgentRequest.SessionID next time, which
// adds --resume <id>.
func ExampleConfig_claudeCode() {
	driver := agentcmd.New(agentcmd.Config{
		Format: agentcmd.FormatClaude,
		// The default command is claude -p --output-format stream-json
		// --verbose; a real run also needs a permission mode.
		Argv: []string{"claude", "-p", "--output-format", "stream-json", "--verbose", "--permission-mode", "acceptEdits"},
	})
	_ = driver // driver.Execute(ctx, req, onEvent) runs claude in req.WorkspacePath
}

// The agent in the OS sandbox where there is one (Containment says which):
// it writes its workspace and nothing of the host's (the package's tests
// show what it is refused), and its environment
// holds what the allowlist, PassEnv and Env give it, never the team's own
// secrets (FOREMAN_NOTIFY_SECRET), whatever the host's environment holds.
func ExampleConfig_sandbox() {
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)

	driver := agentcmd.New(agentcmd.Config{
		Argv: []string{"sh", "-c", `echo "greeting: $GREETING"; echo "webhook secret: ${FOREMAN_NOTIFY_SECRET:-not here}"
touch made-here && echo "wrote my workspace"`, "agent"},
		Env: []string{"GREETING=hello"},
		// The default: bwrap where it works, unsandboxed (and said so)
		// elsewhere. Binds, Hide and UnshareNet widen or narrow it.
		Sandbox: agentcmd.Sandbox{},
		// Host variables beyond DefaultPassEnv that the agent may have.
		PassEnv: []string{"MY_TOOL_*"},
	})
	_ = driver.Containment() // "bwrap", or "none: " and why
	res, err := driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil)
	if err != nil {
		panic(err)
	}
	fmt.Print(res.Output)
	// Output:
	// greeting: hello
	// webhook secret: not here
	// wrote my workspace
}

// A host done with a workspace for good removes the home its agents kept
// there (their CLI's sessions, whatever they wrote in ~) before the
// workspace itself.
func ExampleDriver_RemoveHome() {
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)
	leases, err := os.MkdirTemp("", "agentcmd-leases")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(leases)

	// With a LeaseDir, each workspace's agents keep a home under
	// <LeaseDir>/homes across executions.
	// (In a sandbox; unsandboxed, the agent's home is the host's.)
	driver := agentcmd.New(agentcmd.Config{Argv: []string{"true"}, LeaseDir: leases})
	if _, err := driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, nil); err != nil {
		panic(err)
	}
	fmt.Println(driver.RemoveHome(context.Background(), workspace))
	homes, _ := filepath.Glob(filepath.Join(leases, "homes", "*"))
	fmt.Println(len(homes), "home left")
	// Output:
	// <nil>
	// 0 home left
}

// A host hides a directory of its own from its agents and names it for the
// notes: with a LeaseDir the agent finds an empty, writable decoy there,
// and what it wrote comes back as a phases.StreamSandbox note once it is
// gone ("agentcmd: sandbox: wrote "planted" into the hidden settings
// directory (...): a decoy, nothing real changed"), the real directory
// untouched. It needs bubblewrap (SandboxRequired), so it prints what it
// got rather than a fixed output.
func ExampleDriver_WithHideNamed() {
	settings, err := os.MkdirTemp("", "agentcmd-settings")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(settings)
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)
	leases, err := os.MkdirTemp("", "agentcmd-leases")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(leases)

	driver := agentcmd.New(agentcmd.Config{
		Argv:     []string{"sh", "-c", `echo evil > "$SETTINGS/planted"`},
		Env:      []string{"SETTINGS=" + settings},
		LeaseDir: leases,
		Sandbox:  agentcmd.Sandbox{Mode: agentcmd.SandboxRequired},
	}).WithHideNamed(settings, "settings directory")
	_, err = driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, func(ev phases.StreamEvent) {
		if ev.Kind == phases.StreamSandbox {
			fmt.Println(ev.Text)
		}
	})
	if err != nil {
		fmt.Println(err) // no sandbox here: ErrNoSandbox
	}
	_, err = os.Stat(filepath.Join(settings, "planted"))
	fmt.Println("planted in the real directory:", err == nil)
}

// An agent that prints without end is stopped at Config.MaxOutputBytes:
// nothing past the bound is parsed or kept, the result says why, and a
// phases.StreamSandbox note tells the host (a team counts it as a
// refusal of the story's agent).
func ExampleConfig_maxOutputBytes() {
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)

	driver := agentcmd.New(agentcmd.Config{
		Argv:           []string{"yes", "flood"},
		MaxOutputBytes: 64 << 10,
		Sandbox:        agentcmd.Sandbox{Mode: agentcmd.SandboxOff},
	})
	res, err := driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, func(ev phases.StreamEvent) {
		if ev.Kind == phases.StreamSandbox {
			fmt.Println(ev.Text)
		}
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Success, res.Error)
	// Output:
	// agentcmd: output: stopped the agent: it printed more than 64 KiB (Config.MaxOutputBytes), a flood; the rest is not read
	// false stopped at once: the agent printed more than 64 KiB (Config.MaxOutputBytes): an output flood
}

// A host hides a directory of its agents' siblings and mirrors its names:
// the agent finds an empty directory for each entry of the real one, and
// reaching for one by its name comes back as a phases.StreamSandbox note
// ("agentcmd: sandbox: opened "story-B/" in the hidden directory (...)").
// It needs bubblewrap (SandboxRequired) and a LeaseDir, so it prints what
// it got rather than a fixed output.
func ExampleDriver_WithMirror() {
	siblings, err := os.MkdirTemp("", "agentcmd-siblings")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(siblings)
	if err := os.WriteFile(filepath.Join(siblings, "secret.txt"), []byte("hunter2"), 0o600); err != nil {
		panic(err)
	}
	workspace, err := os.MkdirTemp("", "agentcmd-example")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(workspace)
	leases, err := os.MkdirTemp("", "agentcmd-leases")
	if err != nil {
		panic(err)
	}
	defer os.RemoveAll(leases)

	driver := agentcmd.New(agentcmd.Config{
		Argv:     []string{"sh", "-c", `cat "$SIBLINGS/secret.txt"`},
		Env:      []string{"SIBLINGS=" + siblings},
		LeaseDir: leases,
		Sandbox:  agentcmd.Sandbox{Mode: agentcmd.SandboxRequired},
	}).WithMirror(siblings)
	res, err := driver.Execute(context.Background(), phases.AgentRequest{WorkspacePath: workspace}, func(ev phases.StreamEvent) {
		if ev.Kind == phases.StreamSandbox {
			fmt.Println(ev.Text)
		}
	})
	if err != nil {
		fmt.Println(err) // no sandbox here: ErrNoSandbox
		return
	}
	fmt.Printf("the agent read %q\n", res.Output)
}
