// Package gates holds the default verification services of package phases:
// a Verifier that runs a gate plan's commands, and a FeedbackGenerator that
// turns the failures into instructions for the agent's next iteration.
//
// The Verifier runs the plan's levels in the order L0 (contracts), L1
// (tests), L2 (black-box), L3 (CI), whatever their order in the plan. Each
// check is an argv (no shell unless the argv is one, e.g. sh -c ...) run in
// the snapshot's workspace, in its own process group, with a timeout
// (GateCheck.Timeout, else VerifierConfig.DefaultTimeout) measured on the
// configured clock. On timeout or cancellation the whole group is killed, so
// children the check started die with it. A check's combined stdout and
// stderr is kept up to VerifierConfig.OutputLimit bytes: its head and tail,
// with a marker saying how much was left out in between.
//
// Verification stops at the first level that fails; later levels are
// reported Skipped, unless the plan says RunAll. Checks within a level all
// run (sequentially, or up to VerifierConfig.Parallelism at once). L3 is
// external CI: a configured CIChecker is consulted when the plan has an L3
// level, after that level's commands, if any; an L3 level with neither is an
// invalid plan.
//
// A failing check is a result, never an error: that includes a check whose
// binary cannot be started (its output says why). Verify returns an error
// only for an invalid plan (*PlanError, before anything runs), a snapshot
// without a WorkspacePath (ErrNoWorkspace), a CIChecker error, or a context
// that ended; in the last two cases the report holds the levels that had
// finished. A plan with no check at all is invalid (ErrEmptyPlan): it would
// pass any change. To waive the gates, say so with VerifyOptions.Skip, which
// phases sets from TaskSpec.SkipVerification.
//
// A check runs the code under verification, which an untrusted agent may
// have written: with VerifierConfig.Sandbox each check runs contained
// (agentcmd.Driver is a Sandbox: the agent's own sandbox, an environment
// built from an allowlist), and what the sandbox refused of it is its
// CheckResult.Refused; a check that cannot be contained does not run
// (ErrNotContained). Without one a check runs on the host, with the
// host's environment and rights.
//
// The FeedbackGenerator writes plain text within a byte budget: what failed
// (level, name, command, exit status, head and tail of the output), which
// levels did not run, what the last iteration changed, and what to do next.
// Its output is a pure function of its input.
package gates
