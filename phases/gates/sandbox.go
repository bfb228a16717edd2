package gates

import "context"

// Sandbox contains the processes of the checks a Verifier runs. A check
// runs the code under verification (a test file the agent wrote, a build
// script it changed), so a Verifier for untrusted work runs each check in
// the same kind of sandbox as the agent: agentcmd.Driver is a Sandbox
// that does (see its Contain method), and pipeline/team gives its default
// Verifier the sandbox of its agent.
type Sandbox interface {
	// Contain returns the command to run in place of cmd, and what to do
	// once it has ended. An error means the check cannot be contained
	// (a sandbox required where none is available, its setup failed):
	// the check does not run, and Verify returns the error.
	Contain(ctx context.Context, cmd CheckCommand) (Contained, error)
}

// CheckCommand is a check's process as the Verifier would start it.
type CheckCommand struct {
	// Dir is the snapshot's workspace, where the check runs.
	Dir string
	// Argv is the check's command line.
	Argv []string
	// Env is what the Verifier adds to the check's environment
	// (VerifierConfig.Env, then the check's own GateCheck.Env); the rest
	// of the environment is the Sandbox's to build: without one, a check
	// inherits the host's whole environment.
	Env []string
}

// Contained is a check's command made to run in a sandbox.
type Contained struct {
	// CheckCommand is what the Verifier runs instead: its Env is the whole
	// environment (nothing of the host's is added to it).
	CheckCommand
	// Done is called once the check's processes have ended (also when
	// the command did not start): it returns what the sandbox refused or
	// repaired of the check's (one line each: a write into a hidden
	// place, a branch moved in its private copy of the refs), which the
	// check's result carries as Refused, and removes what Contain made.
	// Nil means nothing to do.
	Done func(ctx context.Context) []string
}
