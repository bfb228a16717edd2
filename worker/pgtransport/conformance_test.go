package pgtransport_test

import (
	"time"

	"testing"

	"github.com/agentforeman/foreman/phases"
	"github.com/agentforeman/foreman/worker"
	"github.com/agentforeman/foreman/worker/pgtransport"
	"github.com/agentforeman/foreman/worker/transporttest"
)

// The PostgreSQL transport passes the conformance suite the in-process
// Runtime passes: a coordinator and two worker hosts on one database.
func TestConformance(t *testing.T) {
	transporttest.Run(t, func(t *testing.T, agent phases.AgentDriver, inbox worker.Inbox) worker.Transport {
		e := newEnv(t)
		c := e.coordinator(t, pgtransport.Config{Leader: e.lead(t, "coordinator"), PollInterval: 100 * time.Millisecond}, inbox)
		for range 2 {
			e.host(t, pgtransport.HostConfig{Capacity: 4, PollInterval: 100 * time.Millisecond, Runtime: worker.RuntimeConfig{Agent: agent}})
		}
		return c
	})
}
