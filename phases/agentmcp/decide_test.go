package agentmcp_test

import (
	"testing"

	"github.com/stretchr/testify/assert"

	"github.com/agentforeman/foreman/phases/agentmcp"
)

func TestDecide(t *testing.T) {
	t.Parallel()
	completeNoChange := agentmcp.Check{ClaimsCompletion: true, NeedsChange: true}
	cases := []struct {
		name  string
		fence agentmcp.Fence
		check agentmcp.Check
		want  agentmcp.Verdict
	}{
		{"current, well formed", agentmcp.FenceCurrent, agentmcp.Check{}, agentmcp.Accepted},
		{"current, completion with a change", agentmcp.FenceCurrent, agentmcp.Check{ClaimsCompletion: true, NeedsChange: true, Changed: true}, agentmcp.Accepted},
		{"current, completion of a stage that changes nothing", agentmcp.FenceCurrent, agentmcp.Check{ClaimsCompletion: true}, agentmcp.Accepted},
		{"current, an error report without a change", agentmcp.FenceCurrent, agentmcp.Check{NeedsChange: true}, agentmcp.Accepted},
		{"current, completion without the change it needs", agentmcp.FenceCurrent, completeNoChange, agentmcp.Unproven},
		{"current, malformed", agentmcp.FenceCurrent, agentmcp.Check{Problem: "score 9 is not in 0..4"}, agentmcp.Invalid},
		{"current, malformed wins over unproven", agentmcp.FenceCurrent, agentmcp.Check{Problem: "x", ClaimsCompletion: true, NeedsChange: true}, agentmcp.Invalid},
		{"stale, whatever it says", agentmcp.FenceStale, agentmcp.Check{}, agentmcp.Stale},
		{"stale, even unproven", agentmcp.FenceStale, completeNoChange, agentmcp.Stale},
		{"another assignment's", agentmcp.FenceForeign, agentmcp.Check{}, agentmcp.Forged},
		{"another assignment's, whatever it says", agentmcp.FenceForeign, agentmcp.Check{Problem: "x"}, agentmcp.Forged},
		{"the zero fence refuses", agentmcp.Fence(0), agentmcp.Check{}, agentmcp.Forged},
		{"an unknown fence refuses", agentmcp.Fence(9), agentmcp.Check{}, agentmcp.Forged},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			v := agentmcp.Decide(c.fence, c.check)
			assert.Equal(t, c.want, v, v.String())
		})
	}
}

func TestVerdictIsToolError(t *testing.T) {
	t.Parallel()
	for v, want := range map[agentmcp.Verdict]bool{
		agentmcp.Accepted: false, agentmcp.Stale: false,
		agentmcp.Forged: true, agentmcp.Invalid: true, agentmcp.Unproven: true,
	} {
		assert.Equal(t, want, v.IsToolError(), v.String())
	}
}
