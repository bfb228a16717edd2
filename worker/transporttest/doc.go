// Package transporttest is the conformance suite of worker.Transport: what
// any transport (the in-process Runtime, the PostgreSQL transport, one of
// your own) must do for the Dispatcher to supervise workers through it.
// Run it from a test with a Factory that wires a transport to workers
// running the suite's agent:
//
//	func TestConformance(t *testing.T) {
//		transporttest.Run(t, func(t *testing.T, agent phases.AgentDriver, inbox worker.Inbox) worker.Transport {
//			return worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits}, inbox)
//		})
//	}
//
// The suite checks that an ASSIGN runs the agent with the assignment's
// prompt and worktree and that its outcome (DONE, READY_FOR_REVIEW, FAILED)
// comes back carrying the worker and assignment ids; that a running
// assignment heartbeats and answers a PROBE; that KILL and RESET stop the
// agent and nothing final follows; that commands naming another
// assignment than the worker's current one change nothing (the fence); and
// that a Dispatcher drives many items to completion through it. It waits
// for messages (a generous hang guard, never a timed assertion), so a
// transport that polls passes as well as one that pushes.
package transporttest
