package worker_test

import (
	"testing"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/transporttest"
)

// The in-process Runtime passes the transport conformance suite that every
// transport (worker/pgtransport too) must pass.
func TestRuntimeTransportConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, agent phases.AgentDriver, inbox worker.Inbox) worker.Transport {
		return worker.NewRuntime(worker.RuntimeConfig{Agent: agent, Commits: worker.NoCommits}, inbox)
	})
}
